"""The command line as users meet it, and the installed package."""
