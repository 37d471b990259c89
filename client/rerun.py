"""``dynaeval rerun``: an operator evaluates a submission again, through the API or on the
configured database. A failed job is retried in place (its attempts stay in its history and
nothing is charged to the submitter); a finished one gets a new job."""

from __future__ import annotations

import argparse

from client.common import CliError, open_service


def cmd_rerun(args: argparse.Namespace) -> int:
    if args.server:
        from client.sdk import ApiClientError, DynaevalClient

        try:
            answer = DynaevalClient(args.server).rerun(args.model_id)
        except ApiClientError as exc:
            raise CliError(str(exc)) from None
        job_id = answer["job_id"]
    else:
        job_id = _rerun_locally(args.model_id)
    print(f"submission {args.model_id}: job {job_id} queued")
    return 0


def _rerun_locally(model_id: str) -> str:
    """What ``POST /submissions/{id}/rerun`` does, as the operator of the database (the
    same use case, acting as an admin: nothing is charged to the submitter)."""
    from configs.vocabulary.refusals import Refused
    from store.rules.principals import ADMIN, SCOPES, Principal
    from usecases.evaluations import rerun

    operator = Principal("local-operator", "the database's operator", ADMIN, frozenset(SCOPES))
    service = open_service()
    try:
        return rerun(service, operator, model_id).job_id
    except Refused as exc:
        raise CliError(exc.message) from None
    finally:
        service.close()
