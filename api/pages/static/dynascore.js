// Dynaboard's Dynascore, ported from dynascore/dynascore.py operation for operation, so
// the page ranks exactly like GET /api/v1/tasks/<task>/leaderboard (same sums in the same
// order, numpy's round-half-even at 9 decimals for ties, the same stable tie-break).
(function (root) {
  "use strict";
  var AXES = ["performance", "throughput", "memory", "robustness", "fairness"];
  var RANK_DECIMALS = 9;

  function finite(x) {
    return typeof x === "number" && isFinite(x);
  }

  // numpy.round(x, 9): x * 1e9, round half to even, / 1e9.
  function roundHalfEven(x, decimals) {
    var scale = Math.pow(10, decimals);
    var y = x * scale;
    var r = Math.round(y);
    if (Math.abs(y % 1) === 0.5 && r % 2 !== 0) r -= 1;
    return r / scale;
  }

  // The evaluator's round roll-up: rounds without a value or a weight are skipped.
  function weightedMean(pairs) {
    var num = 0, total = 0, kept = [];
    pairs.forEach(function (p) { if (finite(p[0]) && p[1] > 0) kept.push(p); });
    var top = 0;  // weights scaled by their largest, as the server does (no overflow)
    kept.forEach(function (p) { top = Math.max(top, p[1]); });
    kept = kept.map(function (p) { return [p[0], p[1] / top]; });
    kept.forEach(function (p) { total += p[1]; });
    if (!total) return null;
    kept.forEach(function (p) { num += p[0] * p[1]; });
    return num / total;
  }

  function sameWeights(a, b, names) {
    return names.every(function (n) { return Number(a[n]) === Number(b[n]); });
  }

  // Rows with performance/robustness/fairness re-averaged under roundWeights (the rows as
  // stored when those are the task's own round weights).
  function reweight(models, rounds, roundWeights, defaults) {
    if (sameWeights(roundWeights, defaults, rounds)) return models;
    return models.map(function (m) {
      var byRound = {};
      (m.rounds || []).forEach(function (r) { byRound[r.round] = r; });
      var copy = Object.assign({}, m, { performance_ci: null, secondary: {}, secondary_ci: {} });
      ["performance", "robustness", "fairness"].forEach(function (axis) {
        copy[axis] = weightedMean(rounds.map(function (name) {
          var r = byRound[name];
          return [r ? r[axis] : null, roundWeights[name]];
        }));
      });
      Object.keys(m.secondary || {}).forEach(function (metric) {  // BLEU beside chrF++, as the server
        copy.secondary[metric] = weightedMean(rounds.map(function (name) {
          var r = byRound[name];
          return [r && r.secondary ? r.secondary[metric] : null, roundWeights[name]];
        }));
      });
      return copy;
    });
  }

  // amrs(): consecutive pairs by performance (stable sort), near-ties skipped.
  function amrs(utils, tolerance) {
    var n = utils.length, perf = utils.map(function (u) { return u.performance; });
    var order = perf.map(function (_, i) { return i; });
    order.sort(function (a, b) { return perf[a] - perf[b] || a - b; });
    var max = Math.max.apply(null, perf);
    var threshold = n ? tolerance * Math.abs(max) : 0;
    var sums = {}, counts = {}, pairs = 0;
    AXES.forEach(function (a) { sums[a] = 0; counts[a] = 0; });
    for (var k = 1; k < n; k++) {
      var lo = utils[order[k - 1]], hi = utils[order[k]];
      var dPerf = hi.performance - lo.performance;
      if (!(dPerf > threshold)) continue;
      pairs += 1;
      AXES.forEach(function (a) {
        var ratio = Math.abs(hi[a] - lo[a]) / dPerf;
        if (!isNaN(ratio)) { sums[a] += ratio; counts[a] += 1; }
      });
    }
    var rates = {};
    AXES.forEach(function (a) { rates[a] = counts[a] > 0 ? sums[a] / counts[a] : NaN; });
    return { rates: rates, pairs: pairs };
  }

  // coarsen(): dynascore.resolution.coarsen. From the best value down, the values within
  // one resolution of their group's first value take the group's median.
  function median(values) {
    var sorted = values.slice().sort(function (a, b) { return a - b; }), n = sorted.length;
    return n % 2 ? sorted[(n - 1) / 2] : sorted[n / 2 - 1] / 2 + sorted[n / 2] / 2;
  }

  function coarsen(values, resolution) {
    var amount = resolution ? Number(resolution.amount) : 0;
    if (!(amount > 0) || values.length < 2) return values.slice();
    var order = values.map(function (_, i) { return i; });
    order.sort(function (a, b) { return values[b] - values[a] || a - b; });
    var result = new Array(values.length), start = 0;
    while (start < order.length) {
      var anchor = values[order[start]];
      var reach = resolution.relative ? amount * Math.abs(anchor) : amount;
      var stop = start + 1;
      while (stop < order.length && anchor - values[order[stop]] <= reach) stop += 1;
      var members = order.slice(start, stop);
      var value = median(members.map(function (i) { return values[i]; }));
      members.forEach(function (i) { result[i] = value; });
      start = stop;
    }
    return result;
  }

  // board score: 100 for the board's best Dynascore, 0 for its worst (all 100 when equal)
  function boardScore(dynascore, low, high) {
    return high > low ? 100 * (dynascore - low) / (high - low) : 100;
  }

  // prepare(): all of compute() that the axis weights do not change: which models are
  // complete, their utilities after coarsening, the exchange rates and every model's units
  // (one column per axis). A slider move then only weighs, sorts and ranks (rank()).
  function prepare(models, options) {
    options = options || {};
    var memory = options.instanceMemory, tolerance = options.tolerance || 1e-4;
    var complete = [], unranked = [];
    // an axis the task measures on no model: the same 0 for all, so no exchange rate and
    // no share (the server does the same)
    var unmeasured = options.unmeasured || [];
    var valueOf = function (m, a) { return unmeasured.indexOf(a) >= 0 ? 0 : m[a]; };
    models.forEach(function (m) {
      var missing = AXES.filter(function (a) { return !finite(valueOf(m, a)); });
      if (missing.length) unranked.push({ model: m, missing: missing });
      else complete.push(m);
    });
    Object.freeze(unranked);
    var prepared = { complete: complete, unranked: unranked, rates: {}, pairs: 0, usable: [], units: [], columns: {} };
    if (!complete.length) return prepared;
    var utils = complete.map(function (m) {
      var u = {};
      AXES.forEach(function (a) { u[a] = Number(valueOf(m, a)); });
      u.memory = memory - u.memory;
      return u;
    });
    var resolution = options.resolution || {};
    AXES.forEach(function (a) {
      var coarse = coarsen(utils.map(function (u) { return u[a]; }), resolution[a]);
      utils.forEach(function (u, i) { u[a] = coarse[i]; });
    });
    var found = amrs(utils, tolerance), rates = found.rates;
    rates.performance = 1.0;
    var usable = AXES.filter(function (a) { return finite(rates[a]) && rates[a] > 0; });
    usable.forEach(function (a) {
      var column = new Float64Array(complete.length);
      utils.forEach(function (u, i) { column[i] = u[a] / rates[a]; });
      prepared.columns[a] = column;
    });
    // frozen: every ranking of this board hands out the same objects
    prepared.units = utils.map(function (u, i) {
      var units = {};
      AXES.forEach(function (a) { units[a] = usable.indexOf(a) >= 0 ? prepared.columns[a][i] : null; });
      return Object.freeze(units);
    });
    prepared.performance = Float64Array.from(complete, function (m) { return m.performance; });
    prepared.rates = Object.freeze(rates);
    prepared.pairs = found.pairs;
    prepared.usable = usable;
    return prepared;
  }

  // rank(): the ranked leaderboard of a prepared board under these axis weights, plus what
  // the page needs to say whether the Dynascore is defined.
  function rank(prepared, weights) {
    var complete = prepared.complete, n = complete.length;
    var result = { models: [], unranked: prepared.unranked, amrs: {}, shares: {}, pairs: 0 };
    if (!n) {  // the server's sentence: the warning is never an empty bar
      result.defined = false;
      result.undefinedReason = "No model has a complete result yet.";
      return result;
    }
    var kept = prepared.usable.filter(function (a) { return weights[a] > 0; });
    var total = 0;
    kept.forEach(function (a) { total += weights[a]; });
    var shares = {};
    if (total) kept.forEach(function (a) { shares[a] = weights[a] / total; });
    // score = 0.0, then + share * units axis by axis in AXES order, as the server adds them
    var scores = new Float64Array(n), i;
    AXES.forEach(function (a) {
      if (!(a in shares)) return;
      var share = shares[a], column = prepared.columns[a];
      for (i = 0; i < n; i++) scores[i] = scores[i] + share * column[i];
    });
    var order = orderOf(scores, prepared.performance);
    // a NaN score sorts nowhere in particular: its ranks are counted instead
    var ranks = scores.some(isNaN) ? ranksByCount(scores) : ranksAlong(scores, order);
    var low = Infinity, high = -Infinity;
    for (i = 0; i < n; i++) { low = Math.min(low, scores[i]); high = Math.max(high, scores[i]); }
    var ranked = new Array(n);
    for (var k = 0; k < n; k++) {
      var at = order[k];
      ranked[k] = { model: complete[at], index: at, dynascore: scores[at], units: prepared.units[at],
                    rank: ranks[at], score: boardScore(scores[at], low, high) };
    }
    result.models = ranked;
    result.amrs = prepared.rates;
    result.shares = shares;
    result.pairs = prepared.pairs;
    result.defined = prepared.pairs > 0 && Object.keys(shares).length > 0;
    result.undefinedReason = prepared.pairs === 0
      ? "The Dynascore is undefined: it needs at least two models whose performance differs, and this leaderboard has " + (n === 1 ? "only one model." : "none that differ.")
      : (Object.keys(shares).length ? "" : "The Dynascore is undefined for these weights: every weighted axis is the same for all models. Give another axis a weight.");
    return result;
  }

  // The board's order: Dynascore high to low, then performance, then the models' order.
  function orderOf(scores, performance) {
    var n = scores.length, order = new Array(n);
    for (var i = 0; i < n; i++) order[i] = i;
    return order.sort(function (a, b) {
      var x = scores[a], y = scores[b];
      if (x !== y) return y - x;
      var pa = performance[a], pb = performance[b];
      if (pa !== pb) return pb - pa;
      return a - b;
    });
  }

  // rank = 1 + how many rounded scores are strictly greater. Rounding keeps the order, so
  // along the board's order that is the first place holding the same rounded score.
  function ranksAlong(scores, order) {
    var ranks = new Array(scores.length), first = 0, previous = NaN;
    for (var k = 0; k < order.length; k++) {
      var rounded = roundHalfEven(scores[order[k]], RANK_DECIMALS);
      if (rounded !== previous) { first = k; previous = rounded; }
      ranks[order[k]] = 1 + first;
    }
    return ranks;
  }

  // The same, counted, for scores holding a NaN (greater than nothing: rank 1).
  function ranksByCount(scores) {
    var rounded = Array.from(scores, function (s) { return roundHalfEven(s, RANK_DECIMALS); });
    var desc = rounded.filter(function (r) { return !isNaN(r); }).sort(function (a, b) { return b - a; });
    var greater = new Map();
    desc.forEach(function (r, k) { if (!greater.has(r)) greater.set(r, k); });
    return rounded.map(function (r) { return 1 + (isNaN(r) ? 0 : greater.get(r)); });
  }

  // compute(): prepare() then rank(): the ranked leaderboard of the complete models.
  function compute(models, weights, options) {
    return rank(prepare(models, options), weights);
  }

  var api = { AXES: AXES, compute: compute, prepare: prepare, rank: rank, reweight: reweight, amrs: amrs, coarsen: coarsen, boardScore: boardScore, roundHalfEven: roundHalfEven, weightedMean: weightedMean };
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  else root.Dynascore = api;
})(this);
