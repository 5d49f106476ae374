"""Reading a run or a policy after the fact: credit quality, the teacher probe and the
reports (tables, curves, credit pages, compare/demo pages).

May import: every room below the loops (root, settings/, envs/, models/, step/,
estimators/, runs/); not loops/, recipes/ or commands/.
"""
