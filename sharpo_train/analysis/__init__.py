"""Reading a run or a policy after the fact: credit quality, the teacher probe and the
reports (tables, curves, credit pages, compare/demo pages).
"""
