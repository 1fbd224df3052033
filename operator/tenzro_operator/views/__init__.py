"""The one read model of a run: what ``tenzro train get-run`` / ``trainer-stats`` / ``reward``, the
explorer and the gateway's reads show, folded from the registry's getters and the run's events
(`run`), and a trainer's reward and claim proof from it (`reward`). Read-only: it must not send
transactions or import the roles, the daemons or the CLI.
"""
