// Table bodies kept in step with a ranking. A long body shows only the rows in and near
// the viewport, between two spacer rows as tall as the rows left out, so a re-rank costs
// the same for 1,000 rows as for 50: the browser lays out the rows it shows, not the
// whole table (one changed cell in a 1,000-row table re-laid out all of it).
(function (root) {
  "use strict";
  var MIN_ROWS = 150;  // shorter bodies are shown whole: their layout is cheap
  var OVERSCAN = 12;   // rows kept above and below the viewport (Tab, fast scrolling)

  var parser = document.createElement("template");
  function parseRows(html) {
    parser.innerHTML = html;
    var parsed = Array.prototype.slice.call(parser.content.children);
    parser.innerHTML = "";
    return parsed;
  }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]; });
  }
  function rowMarkup(r) {
    return '<tr data-model-id="' + esc(r.id) + '"' + r.attrs.map(function (a) { return " " + a[0] + '="' + esc(a[1]) + '"'; }).join("") + ">" + r.cells.join("") + "</tr>";
  }

  // Rows are kept by model id between renders: a re-rank moves them into the new order and
  // re-parses only the cells whose markup changed (the rank and the score, mostly), so the
  // body ends up exactly as if it had been rebuilt from the same markup.
  // rows: [{id, attrs: [[name, value]], cells: [cell markup]}]; before/after: extra nodes.
  function patchRows(tbody, cache, rows, before, after) {
    var fresh = [], patches = [], patched = [];
    rows.forEach(function (r) {
      var kept = cache.get(r.id);
      if (!kept || kept.cells.length !== r.cells.length) { fresh.push(r); return; }
      var changed = [];
      r.cells.forEach(function (c, i) { if (c !== kept.cells[i]) changed.push(i); });
      if (changed.length) {
        patches.push("<tr>" + changed.map(function (i) { return r.cells[i]; }).join("") + "</tr>");
        patched.push({ kept: kept, changed: changed, row: r });
      }
      syncAttrs(kept.tr, r.attrs);
    });
    if (fresh.length) {
      parseRows(fresh.map(rowMarkup).join("")).forEach(function (tr, k) {
        cache.set(fresh[k].id, { tr: tr, cells: fresh[k].cells.slice(), attrs: fresh[k].attrs });
      });
    }
    if (patches.length) {
      parseRows(patches.join("")).forEach(function (tr, k) {
        var p = patched[k], cells = p.kept.tr.cells, parsed = Array.prototype.slice.call(tr.cells);
        p.changed.forEach(function (i, j) {
          p.kept.tr.replaceChild(parsed[j], cells[i]);
          p.kept.cells[i] = p.row.cells[i];
        });
      });
    }
    arrange(tbody, (before || []).concat(rows.map(function (r) { return cache.get(r.id).tr; }), after || []));
    if (cache.size > rows.length * 2 + 2 * OVERSCAN) {  // forget rows no longer shown
      var shown = new Set(rows.map(function (r) { return r.id; }));
      cache.forEach(function (_, id) { if (!shown.has(id)) cache.delete(id); });
    }
  }

  // Put the body's rows in this order, moving only the rows out of place: a row the window
  // keeps stays in the DOM, so a focused link keeps its focus while Tab scrolls the window
  // (a moved row loses it: given back without scrolling).
  function arrange(tbody, order) {
    var focused = document.activeElement, refocus = focused && focused !== document.body && tbody.contains(focused);
    var keep = new Set(order);
    Array.prototype.slice.call(tbody.rows).forEach(function (tr) { if (!keep.has(tr)) tbody.removeChild(tr); });
    var cursor = tbody.firstElementChild;
    order.forEach(function (tr) {
      if (tr === cursor) cursor = cursor.nextElementSibling;
      else tbody.insertBefore(tr, cursor);
    });
    if (refocus && document.activeElement !== focused && tbody.contains(focused)) focused.focus({ preventScroll: true });
  }

  // The attributes a row should have: the given ones, and no other but its model id (a row
  // leaving the window's numbering drops aria-rowindex).
  function syncAttrs(tr, attrs) {
    var want = new Set(["data-model-id"]);
    attrs.forEach(function (a) {
      want.add(a[0]);
      if (tr.getAttribute(a[0]) !== a[1]) tr.setAttribute(a[0], a[1]);
    });
    Array.prototype.slice.call(tr.attributes).forEach(function (a) { if (!want.has(a.name)) tr.removeAttribute(a.name); });
  }

  function spacer(columns) {
    var tr = document.createElement("tr");
    tr.className = "spacer";
    tr.setAttribute("aria-hidden", "true");
    var td = document.createElement("td");
    td.colSpan = columns;
    tr.appendChild(td);
    return tr;
  }

  // One table body. show(count, build) renders rows 0..count-1 where build(i) gives row i;
  // a scroll re-renders the window with the last build.
  function RowWindow(tbody, columns) {
    this.tbody = tbody;
    this.table = tbody.parentNode;
    this.columns = columns;
    this.cache = new Map();
    this.count = 0;
    this.build = null;
    this.start = 0;
    this.end = 0;
    this.all = false;
    this.refined = false;
    var n = tbody.rows.length;
    // the server-rendered rows' mean height, read once: the spacers' unit
    this.rowHeight = n ? Math.max(16, tbody.getBoundingClientRect().height / n) : 40;
    // ... and the columns' widths as the browser laid the server's page of rows out: a
    // windowed table keeps them fixed (the style sheet's widths are the fallback)
    var head = this.table.tHead && this.table.tHead.rows[0];
    this.widths = head ? Array.prototype.map.call(head.cells, function (c) { return c.getBoundingClientRect().width; }) : [];
    this.fixed = false;
    this.measure();
    this.top = spacer(columns);
    this.bottom = spacer(columns);
  }
  // Where the body starts on the page, read when the layout is fresh anyway (load, scroll,
  // resize): a re-rank then reads nothing, so it forces no layout before its writes. Notes
  // above the table that come and go move it by less than OVERSCAN rows.
  RowWindow.prototype.measure = function () {
    this.pageTop = this.tbody.getBoundingClientRect().top + window.pageYOffset;
    // The spacers' unit becomes the first window's mean row height (its columns are fixed,
    // the server's were not), so the window fills the view; once only, as a change moves
    // the rows under a scrolled view.
    var shown = this.end - this.start;
    if (this.refined || !this.windowed() || shown < 1 || this.top.parentNode !== this.tbody) return;
    this.refined = true;
    var mean = (this.bottom.getBoundingClientRect().top - this.top.getBoundingClientRect().bottom) / shown;
    if (mean > 16) this.rowHeight = mean;
  };
  RowWindow.prototype.windowed = function () { return !this.all && this.count > MIN_ROWS; };

  // The rows to show: those the viewport would show, with OVERSCAN on each side, the first
  // even so that the striping (every second row) stays the full table's.
  RowWindow.prototype.range = function (count) {
    if (this.all || count <= MIN_ROWS) return [0, count];
    var h = this.rowHeight, top = this.pageTop - scrollTop;
    var size = Math.ceil(window.innerHeight / h) + 2 * OVERSCAN;
    var first = Math.max(0, Math.floor(-top / h) - OVERSCAN);
    first = Math.min(first, Math.max(0, count - size));
    var shift = first % 2;  // one row earlier to stay even: one row longer to still reach the end
    first -= shift;
    return [first, Math.min(count, first + size + shift)];
  };

  RowWindow.prototype.show = function (count, build, range) {
    this.count = count;
    this.build = build;
    var r = range || this.range(count);
    this.start = r[0];
    this.end = r[1];
    var windowed = this.windowed(), rows = [];
    for (var i = r[0]; i < r[1]; i++) {
      var row = build(i);
      if (windowed) row.attrs = row.attrs.concat([["aria-rowindex", String(i + 2)]]);
      rows.push(row);
    }
    this.table.classList.toggle("windowed", windowed);
    if (windowed && !this.fixed) this.fixWidths();
    if (windowed) {
      this.table.setAttribute("aria-rowcount", String(count + 1));
      setHeight(this.top, r[0] * this.rowHeight);
      setHeight(this.bottom, (count - r[1]) * this.rowHeight);
      patchRows(this.tbody, this.cache, rows, [this.top], [this.bottom]);
    } else {
      this.table.removeAttribute("aria-rowcount");
      patchRows(this.tbody, this.cache, rows);
    }
  };

  // Fixed layout with the widths the server's rows had, so no column collapses however
  // many the viewport can spare (a long name once got none at 1366 px).
  RowWindow.prototype.fixWidths = function () {
    this.fixed = true;
    var head = this.table.tHead && this.table.tHead.rows[0], widths = this.widths;
    if (!head || widths.length !== head.cells.length || !widths.every(function (w) { return w > 0; })) return;
    Array.prototype.forEach.call(head.cells, function (c, i) { c.style.width = widths[i] + "px"; });
    this.table.style.width = widths.reduce(function (a, b) { return a + b; }, 0) + "px";
    this.table.style.minWidth = "0";
  };

  function setHeight(tr, px) {
    var value = Math.round(px) + "px";
    if (tr.firstChild.style.height !== value) tr.firstChild.style.height = value;
  }

  // Scrolling (and keyboard focus, which scrolls) moves every window, once per frame.
  var windows = [], pending = false, scrollTop = window.pageYOffset;
  function onScroll() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () {
      pending = false;
      scrollTop = window.pageYOffset;
      windows.forEach(function (w) { w.measure(); });  // reads first
      var ranges = windows.map(function (w) { return w.windowed() ? w.range(w.count) : null; });
      windows.forEach(function (w, k) {
        if (ranges[k] && (ranges[k][0] !== w.start || ranges[k][1] !== w.end)) w.show(w.count, w.build, ranges[k]);
      });
    });
  }
  window.addEventListener("scroll", onScroll, { passive: true });
  window.addEventListener("resize", onScroll);

  function create(tbody, columns) {
    var w = new RowWindow(tbody, columns);
    windows.push(w);
    onScroll();  // measured again once the first window is laid out
    return w;
  }

  root.Rows = { create: create, patchRows: patchRows, MIN_ROWS: MIN_ROWS };
})(this);
