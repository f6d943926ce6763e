"""Traces a simulator runs on: the Alibaba openb pod and node lists, the Microsoft Philly
job list, and a replay's inputs read from the user's files."""
