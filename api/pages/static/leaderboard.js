// The leaderboard page: sliders re-rank at once with the API's own formula (dynascore.js),
// the weights live in the address, the table sorts by any column, the plots follow.
(function () {
  "use strict";
  document.documentElement.classList.add("js");
  var data = JSON.parse(document.getElementById("board-data").textContent);
  var AXES = data.axes;
  var LABELS = { performance: "Performance", throughput: "Throughput", memory: "Memory", robustness: "Robustness", fairness: "Fairness" };
  var state = { weights: Object.assign({}, data.weights), rounds: Object.assign({}, data.round_weights), sort: "rank", dir: 1 };
  var styleOf = {};
  var openable = new Set(data.openable || []);  // the models whose pages the viewer may open
  data.models.forEach(function (m, i) { styleOf[m.model_id] = Plots.style(i); m.page = openable.has(m.model_id); });
  var base = location.pathname;
  // A saved view's weights, as its page loaded them: moved away from them, the address
  // becomes the task's board with the new weights, which a copied link then shows.
  var viewQuery = null;
  var askedPage = Number(new URLSearchParams(location.search).get("page"));  // before render()
  // The server wrote one page of the ranking; with JavaScript every row is shown, a window
  // of them at a time, so the pages' links go.
  if ($("row-pages")) $("row-pages").hidden = true;
  var boardRows = Rows.create($("leaderboard").tBodies[0], 5 + AXES.length + data.rounds.length);
  var unitRows = Rows.create($("units").tBodies[0], 1 + AXES.length);

  function $(id) { return document.getElementById(id); }
  // One formatter per number of digits: Number#toLocaleString builds a new one per call
  // (the same output, a thousand times slower on a big table).
  var formats = {};
  function fmt(v, digits) {
    if (typeof v !== "number" || !isFinite(v)) return "—";
    if (Math.abs(v) >= 1e6) digits = 0;
    var f = formats[digits] || (formats[digits] = new Intl.NumberFormat("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits }));
    return f.format(v);
  }
  function num(v) { return String(+v); }
  function weightsText(w, names) { return names.map(function (n) { return n + ":" + num(w[n]); }).join(","); }
  function esc(s) { return String(s).replace(/[&<>"]/g, function (c) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]; }); }
  function ci(pair) { return pair && pair[0] != null && pair[1] != null ? '<span class="ci" title="95 % interval">' + fmt(pair[0], 1) + "–" + fmt(pair[1], 1) + "</span>" : ""; }
  function defaultRounds() { return data.rounds.every(function (r) { return Number(state.rounds[r]) === Number(data.default_round_weights[r]); }); }

  function query() {
    var q = "weights=" + weightsText(state.weights, AXES);
    if (!defaultRounds()) q += "&rounds=" + weightsText(state.rounds, data.rounds);
    return q;
  }

  // The 95 % rank ranges come from the server, for the weights the page was opened with:
  // once the sliders leave those, the page says so and links to the same weights opened
  // (under other round weights there are none to give, and the note would promise them).
  var hasRankNotes = !!data.rank_notes && Object.keys(data.rank_notes).length > 0;
  function showRankNotesStale(q, here) {
    var stale = $("rank-notes-stale");
    stale.hidden = !(hasRankNotes && q !== data.rank_notes_for && defaultRounds());
    $("rank-notes-open").href = here;
  }

  function address(q) {
    if (!data.view_path) return base + "?" + q;
    if (viewQuery === null) viewQuery = q;
    var asSaved = q === viewQuery;
    $("view-changed").hidden = asSaved;
    return asSaved ? data.view_path : data.board_path + "?" + q;
  }

  // Save view and Freeze snapshot post the sliders' weights, not those the page loaded with.
  function keepFormsInStep() {
    var rounds = defaultRounds() ? "" : weightsText(state.rounds, data.rounds);
    document.querySelectorAll("#board-actions form").forEach(function (form) {
      form.elements.weights.value = weightsText(state.weights, AXES);
      form.elements.rounds.value = rounds;
    });
  }

  function syncControls() {
    AXES.forEach(function (a) { setSlider($("w_" + a), state.weights[a]); });
    data.rounds.forEach(function (r) { setSlider($("r_" + r), state.rounds[r]); });
  }
  // A weight as the ranking uses it: one decimal on the 0.1 grid, every digit otherwise (the
  // server's "weight" filter); past the slider's end the thumb stops there, the label not.
  function weightLabel(v) {
    return Math.abs(v * 10 - Math.round(v * 10)) < 1e-9 ? fmt(v, 1) : String(v);
  }
  function setSlider(input, value) {
    input.value = value;
    var shown = weightLabel(Number(value));
    input.setAttribute("aria-valuetext", shown);
    $(input.id + "_value").textContent = shown;
  }

  function sortValue(entry, key) {
    var m = entry.model;
    if (key === "rank") return entry.rank;
    if (key === "name") return m.name.toLowerCase();
    if (key === "dynascore") return entry.dynascore;
    if (key === "score") return entry.score;
    if (key.indexOf("round:") === 0) {
      var r = (m.rounds || []).filter(function (x) { return x.round === key.slice(6); })[0];
      return r && r.performance != null ? r.performance : -Infinity;
    }
    if (key.indexOf("secondary:") === 0) {
      var value = (m.secondary || {})[key.slice(10)];
      return value != null ? value : -Infinity;
    }
    return m[key];
  }

  // What the axis weights do not change (utilities, exchange rates, units), kept for the
  // last few round weightings: an axis slider's move only weighs, sorts and ranks.
  var prepared = new Map();
  function preparedBoard() {
    var key = weightsText(state.rounds, data.rounds);
    var found = prepared.get(key);
    if (found) prepared.delete(key);  // re-set below: the least recently used goes first
    else {
      var models = Dynascore.reweight(data.models, data.rounds, state.rounds, data.default_round_weights);
      found = Dynascore.prepare(models, { instanceMemory: data.instance_memory_gib, tolerance: data.tolerance, resolution: data.resolution, unmeasured: data.unmeasured });
      if (prepared.size >= 8) prepared.delete(prepared.keys().next().value);
    }
    prepared.set(key, found);
    return found;
  }

  function render() {
    var q = query();
    var noRounds = data.rounds.every(function (r) { return !(state.rounds[r] > 0); });
    var noAxes = AXES.every(function (a) { return !(state.weights[a] > 0); });
    var result = null;
    if (!noRounds && !noAxes) result = Dynascore.rank(preparedBoard(), state.weights);
    // Read where the tables are before the first write, so no read below forces a layout.
    var n = result ? result.models.length : 0;
    var ranges = [boardRows.range(n), unitRows.range(n)];
    var here = address(q);
    history.replaceState(null, "", here);
    showRankNotesStale(q, here);
    keepFormsInStep();
    $("download-csv").href = "/api/v1/tasks/" + encodeURIComponent(data.task) + "/leaderboard/download?format=csv&" + q;
    $("download-json").href = "/api/v1/tasks/" + encodeURIComponent(data.task) + "/leaderboard/download?format=json&" + q;
    var warning = $("undefined");
    if (!result) {
      warning.textContent = noRounds ? "Give at least one round a weight above 0." : "Give at least one axis a weight above 0.";
      warning.hidden = false;
      return;
    }
    warning.textContent = result.undefinedReason || "";
    warning.hidden = !!result.defined;
    var huge = result.models.some(function (e) { return Math.abs(e.dynascore) >= 1000; });
    $("huge").hidden = !(huge && result.defined);
    var entries = result.models.slice();
    if (state.sort !== "rank") {
      entries.sort(function (a, b) {
        var x = sortValue(a, state.sort), y = sortValue(b, state.sort);
        return (x < y ? -1 : x > y ? 1 : 0) * state.dir || a.rank - b.rank;
      });
    } else if (state.dir < 0) entries.reverse();
    var counts = {};
    result.models.forEach(function (e) { counts[e.rank] = (counts[e.rank] || 0) + 1; });
    // Rows are built for the window shown only (rows.js): the cost follows the viewport.
    $("rows-note").hidden = n <= Rows.MIN_ROWS;
    boardRows.show(n, function (i) { var e = entries[i]; return row(e, result, counts[e.rank] > 1, q); }, ranges[0]);
    unitRows.show(n, function (i) { return unitRow(result.models[i], result); }, ranges[1]);
    var foot = $("units").tFoot.rows[0].cells;
    AXES.forEach(function (a, i) { foot[i + 1].textContent = fmt(result.amrs[a], 4); });
    $("unranked").innerHTML = result.unranked.map(function (u) {
      return '<li data-model-id="' + esc(u.model.model_id) + '">' + modelLink(u.model) + ": missing axes: " + esc(u.missing.join(", ")) + "</li>";
    }).join("");
    $("unranked-section").hidden = !result.unranked.length;
    document.querySelectorAll("#leaderboard thead th").forEach(function (th) {
      var b = th.querySelector("button");
      if (!b) return;
      if (b.dataset.sort === state.sort) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
    schedulePlots(result);
    announce(result);
  }

  // Screen readers hear a re-rank (not the first draw): the top of the new order, once the
  // moves settle.
  var announced = null, announceTimer = null;
  function announce(result) {
    var top = result.models.slice(0, 3).map(function (e) { return e.rank + ". " + e.model.name; }).join(", ");
    var words = "Re-ranked " + result.models.length + " models: " + top + ".";
    if (announced === null) { announced = words; return; }
    if (words === announced) return;
    announced = words;
    clearTimeout(announceTimer);
    announceTimer = setTimeout(function () { $("announce").textContent = words; }, 400);
  }

  function unitRow(e, result) {
    return { id: e.model.model_id, attrs: [], cells: ['<th scope="row">' + esc(e.model.name) + "</th>"].concat(AXES.map(function (a) {
      return '<td class="n">' + (a in result.shares && e.units[a] != null ? fmt(result.shares[a] * e.units[a], 2) : "—") + "</td>";
    })) };
  }

  // Plots out of view are redrawn when the browser is idle (at most once for a burst of
  // moves), not in the re-rank's frame; plots in view are redrawn at once.
  var plotsInView = false, plotsPending = null;
  if ("IntersectionObserver" in window) {
    new IntersectionObserver(function (seen) {
      plotsInView = seen[seen.length - 1].isIntersecting;
      if (plotsInView && plotsPending) drawPending();
    }).observe($("plots"));
  } else plotsInView = true;
  function drawPending() {
    var result = plotsPending;
    plotsPending = null;
    if (result) drawPlots(result);
  }
  var idle = window.requestIdleCallback || function (f) { return setTimeout(f, 50); };
  var firstDraw = true;
  function schedulePlots(result) {
    if (plotsInView || firstDraw) { firstDraw = false; plotsPending = null; drawPlots(result); return; }
    if (!plotsPending) idle(drawPending, { timeout: 300 });
    plotsPending = result;
  }

  // A link to the model's page where the viewer may open it (its submitter, the task's
  // owner, admins), its name otherwise.
  function modelLink(m) {
    return m.page ? '<a href="/models/' + encodeURIComponent(m.model_id) + '">' + esc(m.name) + "</a>" : esc(m.name);
  }

  // How the throughput was measured, and under which conditions when the board mixes them
  // (the server renders the same markup: pages/leaderboard.html).
  function throughputMarks(m) {
    var marks = "";
    if (m.throughput_mode === "single_stream") marks += '<span class="mode" title="served one example per request: a single-stream figure, not batched">single-stream</span>';
    var group = (data.condition_groups || {})[m.conditions];
    if (group) marks += '<span class="cond" title="' + esc(group.label) + '">conditions ' + esc(group.letter) + "</span>";
    return marks;
  }

  function row(e, result, tied, q) {
    var m = e.model;
    // The API's 95 % rank intervals are known for the weights the server rendered only.
    var note = q === data.rank_notes_for && data.rank_notes && data.rank_notes[m.model_id];
    var cells = ['<td class="n rank">' + e.rank + (tied ? '<span class="tie" title="tied">=</span>' : "") +
      (note ? '<div class="rank-interval" title="95 % rank interval"><span class="visually-hidden">95 % rank interval </span>' + esc(note) + "</div>" : "") + "</td>"];
    cells.push('<th scope="row">' + modelLink(m) + "</th>");
    cells.push('<td class="n score">' + (result.defined ? fmt(e.score, 1) : '<span class="undef" title="undefined">—</span>') + "</td>");
    cells.push('<td class="n raw">' + (result.defined ? fmt(e.dynascore, 2) : "—") + "</td>");
    cells.push('<td class="n">' + fmt(m.performance, 1) + ci(m.performance_ci) + "</td>");
    var beside = data.secondary_metrics || [];
    if (beside.length) {  // one column for every metric reported beside the task's own
      var cis = m.secondary_ci || {};
      cells.push('<td class="n secondary">' + beside.map(function (metric) {
        var label = beside.length > 1 ? '<span class="sub">' + esc(data.metric_labels[metric] || metric) + "</span> " : "";
        return '<div data-metric="' + esc(metric) + '">' + label + fmt((m.secondary || {})[metric], 1) + ci(cis[metric]) + "</div>";
      }).join("") + "</td>");
    }
    cells.push('<td class="n">' + fmt(m.throughput, 0) + throughputMarks(m) + "</td>");
    cells.push('<td class="n" title="peak ' + fmt(m.memory_peak, 3) + ' GiB">' + fmt(m.memory, 3) + "</td>");
    cells.push('<td class="n">' + fmt(m.robustness, 1) + "</td>");
    cells.push('<td class="n">' + fmt(m.fairness, 1) + "</td>");
    data.rounds.forEach(function (r) {
      var found = (m.rounds || []).filter(function (x) { return x.round === r; })[0];
      cells.push('<td class="n">' + (found ? fmt(found.performance, 1) + ci(found.performance_ci) : '<span class="missing">not scored</span>') + "</td>");
    });
    // The API's 95 % tie groups are known for the weights the server rendered only.
    cells.push('<td class="status">' + (m.not_scored_on.length ? '<span class="partial">partial: not scored on ' + esc(m.not_scored_on.join(", ")) + "</span>" : "complete") +
      (m.image_gone ? '<div class="partial" title="' + esc(m.image_gone.reason) + '">image gone: not run on new data</div>' : "") +
      "</td>");
    return { id: m.model_id, attrs: [["data-rank", String(e.rank)], ["data-dynascore", String(e.dynascore)]], cells: cells };
  }

  // The plots draw the top of the ranking: a chart of 10,000 marks (and a legend of as many
  // names) takes seconds to draw and shows nothing one can read; the table has every row.
  var PLOT_MODELS = 100;
  function drawPlots(full) {
    var result = { models: full.models.slice(0, PLOT_MODELS) };
    var note = $("plots-note");
    note.hidden = full.models.length <= PLOT_MODELS;
    note.textContent = "The plots show the top " + PLOT_MODELS + " of the " + full.models.length + " ranked models under these weights, and the scatter plots every model on a Pareto front too; the table and the downloads have every model.";
    // A point per shown model, and every model on the board's Pareto front besides: the
    // front drawn is then the whole board's.
    var points = function (x, xBetter) {
      var point = function (e) {
        var look = styleOf[e.model.model_id];
        return { id: e.model.model_id, name: e.model.name, x: e.model[x], y: e.model.performance, color: look.color, shape: look.shape };
      };
      var shown = result.models.map(point);
      if (full.models.length <= PLOT_MODELS) return shown;
      var ids = new Set(shown.map(function (p) { return p.id; }));
      return shown.concat(Plots.pareto(full.models.map(point), xBetter).filter(function (p) { return !ids.has(p.id); }));
    };
    Plots.scatter($("plot-throughput"), points("throughput", 1), { xLabel: "throughput (examples/s)", yLabel: "performance", xBetter: 1 });
    Plots.scatter($("plot-memory"), points("memory", -1), { xLabel: "memory (GiB)", yLabel: "performance", xBetter: -1 });
    var series = result.models.map(function (e) {
      var values = {};
      (e.model.rounds || []).forEach(function (r) {
        if (r.performance != null) values[r.round] = { y: r.performance, lo: r.performance_ci ? r.performance_ci[0] : null, hi: r.performance_ci ? r.performance_ci[1] : null };
      });
      var look = styleOf[e.model.model_id];
      return { id: e.model.model_id, name: e.model.name, color: look.color, shape: look.shape, values: values };
    });
    Plots.rounds($("plot-rounds"), series, data.rounds);
    var items = result.models.map(function (e) { var look = styleOf[e.model.model_id]; return { name: e.model.name, color: look.color, shape: look.shape }; });
    ["plot-throughput", "plot-memory", "plot-rounds"].forEach(function (id) { Plots.legend($(id), items); });
  }

  document.querySelectorAll("#weights input[type=range]").forEach(function (input) {
    input.addEventListener("input", function () {
      var value = Number(input.value);
      if (input.dataset.axis) state.weights[input.dataset.axis] = value;
      else state.rounds[input.dataset.round] = value;
      setSlider(input, value);
      state.sort = "rank"; state.dir = 1;
      render();
    });
  });
  $("weights").addEventListener("submit", function (ev) { ev.preventDefault(); render(); });
  $("reset").addEventListener("click", function (ev) {
    ev.preventDefault();
    state.weights = Object.assign({}, data.default_weights);
    state.rounds = Object.assign({}, data.default_round_weights);
    state.sort = "rank"; state.dir = 1;
    syncControls();
    render();
  });
  document.querySelectorAll("#leaderboard thead button").forEach(function (b) {
    b.addEventListener("click", function () {
      var key = b.dataset.sort;
      if (state.sort === key) state.dir = -state.dir;
      else { state.sort = key; state.dir = key === "rank" || key === "name" ? 1 : -1; }
      render();
    });
  });
  // Every row in the DOM again, for the browser's find (a re-rank then lays out them all).
  $("all-rows").addEventListener("click", function () {
    var all = !boardRows.all;
    boardRows.all = unitRows.all = all;
    this.setAttribute("aria-pressed", String(all));
    this.textContent = all ? "Show the rows around the view" : "Show every row";
    render();
  });
  // Labels for screen readers: "Performance weight".
  AXES.forEach(function (a) { $("w_" + a).setAttribute("aria-label", LABELS[a] + " weight"); });
  render();
  // A link to one of the server's pages (?page=N, for readers without JavaScript) opens
  // the whole ranking at that page's first row.
  if (askedPage > 1 && boardRows.windowed()) {
    window.scrollTo(0, boardRows.pageTop + (askedPage - 1) * data.page_rows * boardRows.rowHeight);
  }
  // When the page became usable (every row ranked, the sliders live): benchmarks read it.
  if (window.performance && performance.mark) performance.mark("board-ready");
})();
