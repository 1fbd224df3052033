"""The operator's roles: sponsor (post and fund a task), trainer and syncer daemons."""
