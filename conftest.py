"""Repo-level test configuration: pytester for testing the plugin itself."""

pytest_plugins = ["pytester"]
