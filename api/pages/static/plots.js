// Small SVG plots drawn from the data on the page (no library, nothing fetched).
(function (root) {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
  var WIDTH = 440, H = 300, M = { left: 56, right: 16, top: 14, bottom: 46 };

  function el(name, attrs, parent) {
    var node = document.createElementNS(NS, name);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(node);
    return node;
  }
  function text(parent, x, y, content, attrs) {
    var t = el("text", Object.assign({ x: x, y: y }, attrs || {}), parent);
    t.textContent = content;
    return t;
  }
  function color(index) { return PALETTE[index % PALETTE.length]; }
  // A model's mark differs by shape as well as colour, so neither the legend nor a plot
  // relies on colour alone (50 models before a pair repeats both).
  var SHAPES = ["circle", "square", "triangle", "diamond", "down"];
  function style(index) {
    return { color: color(index), shape: SHAPES[(index + Math.floor(index / PALETTE.length)) % SHAPES.length] };
  }
  function shapePath(shape, r) {
    var k = r * 1.25;
    if (shape === "square") return "M" + -r * 0.9 + "," + -r * 0.9 + "h" + r * 1.8 + "v" + r * 1.8 + "h" + -r * 1.8 + "z";
    if (shape === "triangle") return "M0," + -k + "L" + k + "," + k * 0.8 + "L" + -k + "," + k * 0.8 + "z";
    if (shape === "down") return "M0," + k + "L" + k + "," + -k * 0.8 + "L" + -k + "," + -k * 0.8 + "z";
    if (shape === "diamond") return "M0," + -k + "L" + k + ",0L0," + k + "L" + -k + ",0z";
    return "M" + -r + ",0a" + r + "," + r + " 0 1,0 " + 2 * r + ",0a" + r + "," + r + " 0 1,0 " + -2 * r + ",0";
  }
  // a mark at (x, y): moved later by its transform alone
  function mark(parent, shape, x, y, r, attrs) {
    return el("path", Object.assign({ d: shapePath(shape, r), transform: "translate(" + x + " " + y + ")" }, attrs), parent);
  }

  function ticks(lo, hi, log) {
    if (log) {
      var out = [];
      for (var e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) out.push(Math.pow(10, e));
      return out;
    }
    var span = hi - lo || 1, step = Math.pow(10, Math.floor(Math.log10(span / 4)));
    [1, 2, 5, 10].some(function (m) { if (span / (step * m) <= 6) { step *= m; return true; } return false; });
    var result = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) result.push(+v.toFixed(10));
    return result;
  }
  // Tick labels as short as they can be while no two are alike (1.62 and 1.64 GiB are not
  // both "1.6").
  function labels(values) {
    var shown = values.map(label);
    for (var digits = 1; new Set(shown).size < shown.length && digits < 12; digits++) {
      shown = values.map(function (v) { return String(+v.toFixed(digits)); });
    }
    return shown;
  }
  function label(v) {
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e3) return (v / 1e3).toFixed(a >= 1e4 ? 0 : 1) + "k";
    if (a >= 10 || a === 0) return String(Math.round(v));
    return String(+v.toPrecision(2));
  }
  function extent(values, pad) {
    var lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    if (lo === hi) { lo -= pad || 1; hi += pad || 1; }
    var p = (hi - lo) * 0.08;
    return [lo - p, hi + p];
  }

  function frame(container, xLabel, yLabel, W) {
    container.textContent = "";
    var svg = el("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H }, container);
    var g = el("g", { class: "axis" }, svg);
    el("line", { x1: M.left, y1: H - M.bottom, x2: W - M.right, y2: H - M.bottom }, g);
    el("line", { x1: M.left, y1: M.top, x2: M.left, y2: H - M.bottom }, g);
    text(svg, (M.left + W - M.right) / 2, H - 8, xLabel, { "text-anchor": "middle" });
    text(svg, 14, (M.top + H - M.bottom) / 2, yLabel, { "text-anchor": "middle", transform: "rotate(-90 14 " + (M.top + H - M.bottom) / 2 + ")" });
    return svg;
  }

  function yAxis(svg, lo, hi, sy, W) {
    var values = ticks(lo, hi, false), shown = labels(values);
    values.forEach(function (v, i) {
      var y = sy(v);
      el("line", { class: "grid", x1: M.left, x2: W - M.right, y1: y, y2: y }, svg);
      text(svg, M.left - 6, y + 4, shown[i], { "text-anchor": "end" });
    });
  }

  // Models no other model beats on both axes (ties on both count as on the front), in
  // their given order. One sweep from the best x down: O(n log n), not a pair test per two
  // points (seconds at 10,000 models).
  function pareto(points, xBetter) {
    var order = points.map(function (p, i) { return i; });
    var a = points.map(function (p) { return xBetter * p.x; });
    order.sort(function (i, j) { return a[j] - a[i] || points[j].y - points[i].y; });
    var front = new Set(), best = -Infinity;
    for (var k = 0; k < order.length;) {
      var top = points[order[k]].y, end = k;  // a run of equal x: its best y leads it
      while (end < order.length && a[order[end]] === a[order[k]]) end++;
      if (top > best) {
        for (var m = k; m < end && points[order[m]].y === top; m++) front.add(order[m]);
        best = top;
      }
      k = end;
    }
    return points.filter(function (p, i) { return front.has(i); });
  }

  // points: [{id, name, x, y, color}]; xBetter: +1 when more x is better, -1 when less.
  // What a plot was drawn from, by model id: when a re-rank only changes the order of the
  // same points, the drawing is the same but for the order (the stacking) of its marks.
  function signature(items, describe) {
    var sig = new Map();
    items.forEach(function (it) { sig.set(it.id, describe(it)); });
    return sig;
  }
  function sameSignature(state, container, sig, extra) {
    if (!state || state.extra !== extra || state.sig.size !== sig.size || state.svg.parentNode !== container) return false;
    var same = true;
    sig.forEach(function (v, id) { if (same && state.sig.get(id) !== v) same = false; });
    return same;
  }
  var scatterState = new WeakMap(), roundsState = new WeakMap();

  function scatter(container, points, options) {
    var W = WIDTH;
    var sig = signature(points, function (p) { return [p.x, p.y, p.color, p.shape, p.name].join("\u0000"); });
    var extra = [options.xLabel, options.yLabel, options.xBetter].join("\u0000");
    var state = scatterState.get(container);
    if (points.length && sig.size === points.length && sameSignature(state, container, sig, extra)) {
      dropLegend(container);
      points.forEach(function (p) { state.svg.appendChild(state.marks.get(p.id)); });  // the circles come last
      return;
    }
    scatterState.delete(container);
    var svg = frame(container, options.xLabel, options.yLabel, W);
    if (!points.length) { text(svg, W / 2, H / 2, "no ranked model", { "text-anchor": "middle" }); return; }
    var xs = points.map(function (p) { return p.x; }), ys = points.map(function (p) { return p.y; });
    var log = xs.every(function (x) { return x > 0; }) && Math.max.apply(null, xs) / Math.min.apply(null, xs) > 30;
    var tx = log ? Math.log10 : function (v) { return v; };
    var xr = log ? [Math.min.apply(null, xs) / 1.5, Math.max.apply(null, xs) * 1.5] : extent(xs, 1);
    var yr = extent(ys, 1);
    var sx = function (v) { return M.left + (tx(v) - tx(xr[0])) / (tx(xr[1]) - tx(xr[0])) * (W - M.left - M.right); };
    var sy = function (v) { return H - M.bottom - (v - yr[0]) / (yr[1] - yr[0]) * (H - M.top - M.bottom); };
    yAxis(svg, yr[0], yr[1], sy, W);
    var xticks = ticks(xr[0], xr[1], log).filter(function (v) { return v >= xr[0] && v <= xr[1]; });
    var xshown = labels(xticks);
    xticks.forEach(function (v, i) {
      var x = sx(v);
      el("line", { class: "grid", x1: x, x2: x, y1: M.top, y2: H - M.bottom }, svg);
      text(svg, x, H - M.bottom + 15, xshown[i], { "text-anchor": "middle" });
    });
    // under the axis, beside its title: never over a point
    if (log) text(svg, M.left, H - 8, "log scale", { "text-anchor": "start", class: "sub" });
    var front = pareto(points, options.xBetter);
    var path = front.slice().sort(function (a, b) { return a.x - b.x; })
      .map(function (p) { return sx(p.x).toFixed(1) + "," + sy(p.y).toFixed(1); }).join(" ");
    if (front.length > 1) el("polyline", { class: "front", points: path }, svg);
    var marks = new Map(), onFront = new Set(front);
    points.forEach(function (p) {
      var on = onFront.has(p);
      var c = mark(svg, p.shape || "circle", sx(p.x), sy(p.y), 6, {
        class: "point" + (on ? " on-front" : ""), "data-model-id": p.id,
        fill: on ? p.color : "#fff", stroke: p.color, "stroke-width": 2.5
      });
      el("title", {}, c).textContent = p.name + ": " + options.yLabel + " " + p.y.toFixed(1) + ", " + options.xLabel + " " + label(p.x) + (on ? " (Pareto front)" : "");
      marks.set(p.id, c);
    });
    if (sig.size === points.length) scatterState.set(container, { sig: sig, extra: extra, svg: svg, marks: marks });
  }

  // series: [{id, name, color, values: {round: {y, lo, hi}}}]
  function rounds(container, series, roundNames) {
    var W = Math.max(WIDTH, Math.min(1000, 140 * roundNames.length + 40 * series.length * roundNames.length));
    var sig = signature(series, function (s) {
      return JSON.stringify([s.name, s.color, s.shape, roundNames.map(function (r) { return s.values[r] || null; })]);
    });
    var extra = JSON.stringify(roundNames);
    var state = roundsState.get(container);
    if (series.length > 1 && sig.size === series.length && sameSignature(state, container, sig, extra)) {
      // the same series in another order: only each series' offset in its band moves
      dropLegend(container);
      series.forEach(function (s, k) {
        var offset = (k / (series.length - 1) - 0.5) * state.band * 0.6;
        state.marks.get(s.id).forEach(function (m) {
          var x = M.left + state.band * (m.i + 0.5) + offset;
          if (m.interval) {
            m.interval.setAttribute("x1", x); m.interval.setAttribute("x2", x);
            m.lo.setAttribute("x1", x - 4); m.lo.setAttribute("x2", x + 4);
            m.hi.setAttribute("x1", x - 4); m.hi.setAttribute("x2", x + 4);
          }
          m.circle.setAttribute("transform", "translate(" + x + " " + m.y + ")");
        });
        state.svg.appendChild(state.groups.get(s.id));  // the series come last
      });
      return;
    }
    roundsState.delete(container);
    var svg = frame(container, "round", "performance", W);
    var all = [];
    series.forEach(function (s) { roundNames.forEach(function (r) { var v = s.values[r]; if (v) all.push(v.lo != null ? v.lo : v.y, v.hi != null ? v.hi : v.y); }); });
    if (!all.length) { text(svg, W / 2, H / 2, "no ranked model", { "text-anchor": "middle" }); return; }
    var yr = extent(all, 1);
    var sy = function (v) { return H - M.bottom - (v - yr[0]) / (yr[1] - yr[0]) * (H - M.top - M.bottom); };
    var band = (W - M.left - M.right) / roundNames.length;
    yAxis(svg, yr[0], yr[1], sy, W);
    roundNames.forEach(function (r, i) { text(svg, M.left + band * (i + 0.5), H - M.bottom + 15, r, { "text-anchor": "middle" }); });
    var groups = new Map(), marks = new Map();
    series.forEach(function (s, k) {
      var g = el("g", { class: "series", "data-model-id": s.id }, svg);
      var offset = series.length > 1 ? (k / (series.length - 1) - 0.5) * band * 0.6 : 0;
      var kept = [];
      roundNames.forEach(function (r, i) {
        var v = s.values[r];
        if (!v) return;
        var x = M.left + band * (i + 0.5) + offset, m = { i: i, y: sy(v.y) };
        if (v.lo != null && v.hi != null) {
          m.interval = el("line", { class: "interval", x1: x, x2: x, y1: sy(v.lo), y2: sy(v.hi), stroke: s.color, "stroke-width": 2 }, g);
          m.lo = el("line", { x1: x - 4, x2: x + 4, y1: sy(v.lo), y2: sy(v.lo), stroke: s.color, "stroke-width": 2 }, g);
          m.hi = el("line", { x1: x - 4, x2: x + 4, y1: sy(v.hi), y2: sy(v.hi), stroke: s.color, "stroke-width": 2 }, g);
        }
        var c = m.circle = mark(g, s.shape || "circle", x, m.y, 5, { class: "point", "data-model-id": s.id, "data-round": r, fill: s.color });
        el("title", {}, c).textContent = s.name + ", " + r + ": " + v.y.toFixed(1) + (v.lo != null ? " (95 % interval " + v.lo.toFixed(1) + "–" + v.hi.toFixed(1) + ")" : "");
        kept.push(m);
      });
      groups.set(s.id, g);
      marks.set(s.id, kept);
    });
    if (sig.size === series.length) roundsState.set(container, { sig: sig, extra: extra, svg: svg, band: band, groups: groups, marks: marks });
  }

  // The legend is drawn after the plot: a plot kept from the last draw drops its old one.
  function dropLegend(container) {
    var last = container.lastElementChild;
    if (last && last.classList.contains("legend")) container.removeChild(last);
  }

  function legend(container, items) {
    var div = document.createElement("div");
    div.className = "legend";
    items.forEach(function (it) {
      var span = document.createElement("span");
      var svg = el("svg", { width: 12, height: 12, viewBox: "-6 -6 12 12", "aria-hidden": "true" }, span);
      mark(svg, it.shape || "circle", 0, 0, 4.5, { fill: it.color });
      span.appendChild(document.createTextNode(it.name));
      div.appendChild(span);
    });
    container.appendChild(div);
  }

  root.Plots = { scatter: scatter, rounds: rounds, legend: legend, color: color, style: style, pareto: pareto, tickLabels: labels };
})(this);
