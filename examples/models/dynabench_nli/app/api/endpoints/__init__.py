"""Routers."""
