"""Leaderboard response schemas: ranked entries, tie groups, warnings and weight flips."""

from __future__ import annotations

from marshmallow import fields

from api.schemas import ImageGoneSchema, OpenSchema


class LeaderboardEntrySchema(OpenSchema):
    """One ranked model (the five axes, ``memory_peak``, ``units``, ``rounds``,
    ``performance_ci``, ``partial`` and ``not_scored_on`` are in the body too)."""

    rank = fields.Integer(metadata={"description": "1 = best; equal Dynascores share a rank"})
    model_id = fields.String()
    name = fields.String()
    dynascore = fields.Float(
        metadata={"description": "Dynaboard's Dynascore, in points of performance (raw)"}
    )
    score = fields.Float(
        metadata={
            "description": "the readable scale, 0-100: 100 for the board's best Dynascore "
            "under these weights, 0 for its worst, linear in between (100 for all when equal); "
            "it changes only when the board's models or the weights do"
        }
    )
    ranked_as = fields.Dict(
        keys=fields.String(),
        values=fields.Float(),
        metadata={
            "description": "throughput and memory as the ranking counts them: values within "
            "the board's `resolution` of each other count as one (their group's median)"
        },
    )
    secondary = fields.Dict(
        keys=fields.String(),
        values=fields.Float(allow_none=True),
        metadata={
            "description": "the metrics the task's output type reports beside its own (BLEU "
            "beside chrF++, exact match beside F1), combined over rounds like performance"
        },
    )
    secondary_ci = fields.Dict(
        keys=fields.String(),
        values=fields.List(fields.Float(), allow_none=True),
        metadata={"description": "each secondary metric's 95 % interval (null: unknown)"},
    )
    tie_group = fields.Integer(
        metadata={
            "description": "1, 2, ... from the top: the tie group (see `tie_groups`) this model "
            "is in; adjacent ranks in one group cannot be separated at 95 %"
        }
    )
    dynascore_ci = fields.List(
        fields.Float(),
        allow_none=True,
        metadata={
            "description": "[low, high]: the performance 95 % interval carried through the "
            "Dynascore (other axes and the AMRS fixed); null when the model has no interval "
            "(it is then grouped as a point)"
        },
    )
    rank_interval = fields.List(
        fields.Integer(),
        allow_none=True,
        metadata={
            "description": "[best, worst]: the model's 95 % rank interval, every rank it could "
            "take with each model's Dynascore anywhere in its `dynascore_ci` (another model "
            "without one counts as exact); e.g. rank 3 with [2, 5]; null when the model has no "
            "interval itself (e.g. under round weights other than those its result was rolled "
            "up with, in proportion). Unlike tie groups it never chains"
        },
    )
    image_gone = fields.Nested(
        ImageGoneSchema,
        allow_none=True,
        metadata={
            "description": "null while the model's image is kept; else when and why it went "
            "(the model keeps its scores; new rounds stay unscored, see `not_scored_on`)"
        },
    )
    throughput_mode = fields.String(
        allow_none=True,
        metadata={
            "description": "`offline` (batches of the task's size) or `single_stream` (a model "
            "served one example per request); null for results stored before it was recorded"
        },
    )
    conditions = fields.String(
        metadata={
            "description": "the fingerprint of the conditions its speed and memory were "
            "measured under (see `warnings`), or `unknown` for older results"
        }
    )


class ConditionGroupSchema(OpenSchema):
    fingerprint = fields.String(
        metadata={"description": "the conditions fingerprint its models share, or `unknown`"}
    )
    letter = fields.String(metadata={"description": "A, B, ...: the group's name on the page"})
    label = fields.String(metadata={"description": "the conditions in one line"})
    models = fields.Integer(metadata={"description": "how many ranked models it has"})
    conditions = fields.Dict(
        allow_none=True,
        metadata={
            "description": "the comparable fields (cpu_model, model_cpus, own_cpus, "
            "memory_limit_gib, runtime, engine, cgroup_version, method); null when unknown"
        },
    )


class LeaderboardWarningSchema(OpenSchema):
    code = fields.String(
        metadata={
            "description": "`mixed_conditions`: the ranked models' speed and memory were "
            "measured under different conditions; `mixed_throughput_modes`: some throughput "
            "figures are single-stream, others offline (batched); `unmeasured_axis`: a "
            "weight is on an axis the task measures no model on (it counts for nothing)"
        }
    )
    message = fields.String(metadata={"description": "a human sentence"})
    groups = fields.List(
        fields.Nested(ConditionGroupSchema),
        metadata={"description": "mixed_conditions: one per fingerprint, largest first"},
    )
    differs_in = fields.List(
        fields.String(),
        metadata={"description": "mixed_conditions: the comparable fields that differ"},
    )
    modes = fields.Dict(
        keys=fields.String(),
        values=fields.Integer(),
        metadata={"description": "mixed_throughput_modes: models per mode"},
    )
    axes = fields.List(
        fields.String(), metadata={"description": "unmeasured_axis: the weighed axes"}
    )


class TieGroupSchema(OpenSchema):
    group = fields.Integer(metadata={"description": "1 for the top group"})
    model_ids = fields.List(
        fields.String(),
        metadata={"description": "its models on this page, in rank order (`size`: all of them)"},
    )
    rank_range = fields.List(
        fields.Integer(), metadata={"description": "[best rank, worst rank] in the group"}
    )
    size = fields.Integer(metadata={"description": "how many models the group has in all"})


class FlipWeightSchema(OpenSchema):
    above = fields.String(metadata={"description": "model_id ranked higher (models[i])"})
    below = fields.String(metadata={"description": "model_id ranked next (models[i + 1])"})
    axis = fields.String(
        allow_none=True,
        metadata={
            "description": "the one axis whose weight change swaps the pair with the smallest "
            "change; null when no single weight within `flip_weight_range` swaps it"
        },
    )
    weight = fields.Float(
        allow_none=True,
        metadata={
            "description": "the new weight of `axis`: there the two tie, and any weight past it "
            "(in the direction of `delta`, within the range) puts `below` above `above`"
        },
    )
    delta = fields.Float(allow_none=True, metadata={"description": "weight minus current weight"})


class ResolutionSchema(OpenSchema):
    amount = fields.Float(metadata={"description": "the smallest difference that counts"})
    relative = fields.Boolean(
        metadata={"description": "true: `amount` is a fraction of the larger value"}
    )


class LeaderboardSchema(OpenSchema):
    task = fields.String()
    weights = fields.Dict(keys=fields.String(), values=fields.Float())
    rounds = fields.List(fields.String())
    total_models = fields.Integer(
        metadata={"description": "how many models are ranked in all (`models` is one page)"}
    )
    offset = fields.Integer(metadata={"description": "the rank position `models` starts at"})
    limit = fields.Integer(
        allow_none=True, metadata={"description": "the page size asked for (null: all)"}
    )
    models = fields.List(
        fields.Nested(LeaderboardEntrySchema),
        metadata={"description": "the ranked models from `offset`, best first, one page"},
    )
    unranked = fields.List(fields.Dict())
    resolution = fields.Dict(
        keys=fields.String(),
        values=fields.Nested(ResolutionSchema),
        metadata={
            "description": "per axis, the measurement resolution: differences inside it earn "
            "no points and set no exchange rate (throughput: the larger of 2 % and the median "
            "spread of the models' profiling repeats; memory: 16 MiB; the computed axes: 0)"
        },
    )
    tie_confidence = fields.Float(metadata={"description": "0.95: the level of `tie_groups`"})
    tie_groups = fields.List(
        fields.Nested(TieGroupSchema),
        metadata={
            "description": "runs of ranks whose Dynascore intervals chain together; every model "
            "of a group is separated from every model of another (dynascore/README.md)"
        },
    )
    flip_weight_range = fields.List(
        fields.Float(), metadata={"description": "[0, 5]: the weights `flip_weights` searches"}
    )
    flip_weights = fields.List(
        fields.Nested(FlipWeightSchema),
        metadata={
            "description": "one per adjacent pair of `models`, top first, and the pair across "
            "the page's lower edge"
        },
    )
    warnings = fields.List(
        fields.Nested(LeaderboardWarningSchema),
        metadata={
            "description": "what makes the ranked models' figures less comparable, over "
            "every ranked model (not only this page); empty when nothing does"
        },
    )


class ComparisonSchema(OpenSchema):
    candidate = fields.String()
    baseline = fields.String()
    task = fields.String()
    metric = fields.String()
    difference = fields.Float()
    ci = fields.List(fields.Float())
    significant_drop = fields.Boolean()
    rounds = fields.List(fields.Dict())
