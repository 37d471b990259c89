"""Drops the last prediction of every batch."""

from zoo_server import answer_all, serve

serve(lambda instances: answer_all(instances)[:-1])
