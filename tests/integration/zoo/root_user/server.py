"""A well-behaved model whose image would run as root; it reports the uid it got."""

from zoo_server import answer_all, serve

serve(answer_all)
