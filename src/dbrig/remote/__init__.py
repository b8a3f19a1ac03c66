"""Driving servers and clients on other hosts."""
