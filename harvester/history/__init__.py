"""History tasks: real fixes a repository's engineers already made, mined from its git history.

``scan`` reads the history and says of each commit whether it is a fix of model logic (and why not);
``fix`` is the change itself (the fix commit's model files over its parent), read from the repository and
applied to a pin's tree; ``candidate`` turns a history pin into the one candidate the mint confirms (the
parent's text is the bug, the fix its repair); ``mine`` drives it: scan, pin each parent with its fix,
mint through the same admission as every task.
"""
