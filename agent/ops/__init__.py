"""Procedures made of the layers below: the playbook runner (shared by the CLI and the daemon),
the fault drill and the twin-versus-lab check."""
