"""The command line: ``tenzro`` (`main`, its verb groups one module each) and the daemons'
entry points (``tenzro-trainer``, ``python -m tenzro_operator.cli.syncer`` / ``.watcher``).

`common` holds what every verb shares (options, context, output); each verb module registers its
commands on the group `main` hands it and never imports `main`. Nothing outside the command line
imports this package but for `common`'s parsers.
"""
