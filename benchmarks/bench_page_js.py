"""The JavaScript snippets ``bench_page.py`` runs in the leaderboard page through WebDriver."""

from __future__ import annotations

# One move, timed in the page. arguments: slider id, value; the callback gets the timings.
MOVE_JS = """
var done = arguments[arguments.length - 1];
var slider = document.getElementById(arguments[0]), value = arguments[1];
var table = document.getElementById('leaderboard'), body = table.tBodies[0];
var data = JSON.parse(document.getElementById('board-data').textContent);
// the expected top 20 for the new weights, from the page's own function, before the clock
var weights = {}, rounds = {};
data.axes.forEach(function (a) { weights[a] = Number(document.getElementById('w_' + a).value); });
data.rounds.forEach(function (r) { rounds[r] = Number(document.getElementById('r_' + r).value); });
if (slider.dataset.axis) weights[slider.dataset.axis] = Number(value);
else rounds[slider.dataset.round] = Number(value);
var models = Dynascore.reweight(data.models, data.rounds, rounds, data.default_round_weights);
var expected = Dynascore.compute(models, weights,
  {instanceMemory: data.instance_memory_gib, tolerance: data.tolerance, resolution: data.resolution, unmeasured: data.unmeasured})
  .models.slice(0, 20).map(function (e) { return e.model.model_id; });
function shown() {
  var rows = body.querySelectorAll('tr[data-model-id]'), out = [];
  for (var i = 0; i < Math.min(20, rows.length); i++) out.push(rows[i].getAttribute('data-model-id'));
  return out.join(' ') === expected.join(' ');
}
if (window.__sections) window.__sections = {};  // the breakdown pass: the handler's only
var t0 = performance.now();
slider.value = String(value);
slider.dispatchEvent(new Event('input', {bubbles: true}));
var handler = performance.now() - t0;
var inHandler = window.__sections ? Object.assign({}, window.__sections) : null;
void table.offsetHeight;  // force style + layout of the updated page
var frames = 0;
function finish(rerank) {
  requestAnimationFrame(function () {
    setTimeout(function () {
      done({handler: handler, rerank: rerank, next_frame: performance.now() - t0,
            frames: frames, ok: shown(), sections: inHandler});
    }, 0);
  });
}
function poll() {
  if (shown()) { void table.offsetHeight; finish(performance.now() - t0); return; }
  if (++frames > 600) { done({error: 'the table never showed the expected order'}); return; }
  requestAnimationFrame(poll);
}
if (shown()) finish(performance.now() - t0); else requestAnimationFrame(poll);
"""

# The page's table rows (those in the DOM: a long ranking shows a window of them, each with
# its 1-based ``aria-rowindex``, the header row being 1) and its weights query. ``total``
# is the ranking's length: the table's ``aria-rowcount`` less the header row when windowed.
TABLE_JS = """
var table = document.getElementById('leaderboard');
var rows = table.querySelectorAll('tbody tr[data-model-id]'), out = [];
for (var i = 0; i < Math.min(arguments[0], rows.length); i++) {
  var index = rows[i].getAttribute('aria-rowindex');
  out.push([rows[i].getAttribute('data-model-id'), Number(rows[i].getAttribute('data-rank')),
            Number(rows[i].getAttribute('data-dynascore')), index ? Number(index) - 2 : i]);
}
var count = table.getAttribute('aria-rowcount');
return {rows: out, search: location.search, total: count ? Number(count) - 1 : rows.length,
        windowed: table.classList.contains('windowed')};
"""

# Scroll the page so that the table's row arguments[0] (0-based) is at the viewport's top;
# the callback runs two frames later (the window follows the scroll in a frame).
SCROLL_JS = """
var done = arguments[arguments.length - 1], table = document.getElementById('leaderboard');
var head = table.tHead.getBoundingClientRect();
var rowHeight = arguments[1];
window.scrollTo(0, window.scrollY + head.bottom + arguments[0] * rowHeight);
requestAnimationFrame(function () { requestAnimationFrame(function () { setTimeout(done, 0); }); });
"""

# The bare ranking function on the page's rows, no DOM: median ms over arguments[0] runs.
COMPUTE_JS = """
var data = JSON.parse(document.getElementById('board-data').textContent), times = [];
var weights = [];
for (var k = 0; k < arguments[0]; k++) {
  var w = Object.assign({}, data.weights);
  w[data.axes[k % 5]] = [0, 5, 2, 4.5, 1, 3][Math.floor(k / 5) % 6];
  weights.push(w);
}
for (var i = 0; i < arguments[0]; i++) {
  var t0 = performance.now();
  Dynascore.compute(data.models, weights[i],
    {instanceMemory: data.instance_memory_gib, tolerance: data.tolerance, resolution: data.resolution, unmeasured: data.unmeasured});
  times.push(performance.now() - t0);
}
return {times: times, models: data.models.length};
"""

# Wait until the browser has been idle once (deferred work done).
IDLE_JS = """
var done = arguments[arguments.length - 1];
(window.requestIdleCallback || setTimeout)(function () { setTimeout(done, 0); }, {timeout: 2000});
"""

# Wrap the page's heavy calls in timers (for the breakdown pass).
WRAP_JS = """
window.__sections = {};
function wrap(obj, name, label) {
  var f = obj[name];
  if (f.__wrapped) return;
  obj[name] = function () {
    var t0 = performance.now();
    try { return f.apply(this, arguments); }
    finally { window.__sections[label] = (window.__sections[label] || 0) + performance.now() - t0; }
  };
  obj[name].__wrapped = true;
}
wrap(Dynascore, 'reweight', 'reweight');
wrap(Dynascore, 'compute', 'dynascore_compute');
wrap(Dynascore, 'prepare', 'dynascore_prepare');
wrap(Dynascore, 'rank', 'dynascore_rank');
wrap(Plots, 'scatter', 'plot_scatter');
wrap(Plots, 'rounds', 'plot_rounds');
wrap(Plots, 'legend', 'plot_legends');
"""


# What the page shows, as markup: compared after the moves with a fresh load of the address.
# The API's statistical-tie notes are left out: the server sends them for the weights it
# rendered only, so a fresh load of moved weights has them and the moved page cannot. So
# are a windowed table's spacer heights (the rows left out times a measured mean row
# height, a layout estimate): the rows shown, their places and markup are compared as is.
SNAPSHOT_JS = """
return ['leaderboard', 'units', 'plots', 'unranked-section', 'notices', 'downloads']
  .map(function (id) {
    var copy = document.getElementById(id).cloneNode(true);
    copy.querySelectorAll('.rank-interval').forEach(function (n) { n.remove(); });
    copy.querySelectorAll('tr.spacer td').forEach(function (n) { n.removeAttribute('style'); });
    return copy.outerHTML;
  });
"""
