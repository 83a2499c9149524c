// iodump report: draws the aggregated data embedded in this page (schemas/report-data.md)
// on canvases. No external code: everything the page needs is in it.
"use strict";
(function () {
  var DATA = JSON.parse(document.getElementById("iodump-data").textContent);
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#8c6d31", "#7b4173"];
  var CLASS_COLORS = { read: "#1f77b4", write: "#d62728", other: "#2ca02c" };
  var MARGIN = { l: 86, r: 16, t: 8, b: 34 };
  var plotsDrawn = 0;
  var redrawers = [];

  // ---------- formatting ----------
  function fmtNum(v) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    var a = Math.abs(v);
    if (a >= 1e12) return (v / 1e12).toFixed(2) + "T";
    if (a >= 1e9) return (v / 1e9).toFixed(2) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(2) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
    if (a >= 100 || v === Math.round(v)) return String(Math.round(v));
    return v.toFixed(2);
  }
  function fmtBytes(v) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    var u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"], i = 0;
    while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (i === 0 ? String(Math.round(v)) : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)) + " " + u[i];
  }
  function fmtNs(ns) {
    if (ns === null || ns === undefined || !isFinite(ns)) return "-";
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(a >= 1e11 ? 0 : 2) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 0 : 2) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(a >= 1e5 ? 0 : 2) + " µs";
    return Math.round(ns) + " ns";
  }
  function fmtSec(ns) {
    if (ns === 0) return "0 s";
    var s = ns / 1e9, a = Math.abs(s);
    if (a >= 3600) return (s / 3600).toFixed(2) + " h";
    if (a >= 120) return (s / 60).toFixed(1) + " min";
    if (a >= 1) return s.toFixed(a >= 10 ? 1 : 2) + " s";
    return fmtNs(ns);
  }
  function utc(ns) {
    var d = new Date(ns / 1e6);
    return isNaN(d.getTime()) ? "-" : d.toISOString().replace("T", " ").replace("Z", " UTC");
  }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }

  // ---------- DOM helpers ----------
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "html") e.innerHTML = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }
  var tip = document.getElementById("tooltip");
  function showTip(ev, html) {
    tip.innerHTML = html;
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 4) x = ev.clientX - w - 14;
    if (y + h > window.innerHeight - 4) y = ev.clientY - h - 14;
    tip.style.left = Math.max(0, x) + "px";
    tip.style.top = Math.max(0, y) + "px";
  }
  function hideTip() { tip.hidden = true; }

  function plotWidth(container) {
    return Math.max(400, Math.min(1360, (container.clientWidth || document.body.clientWidth || 1200) - 4));
  }
  function makeCanvas(container, w, h) {
    var c = container.querySelector("canvas");
    if (!c) { c = el("canvas"); container.appendChild(c); }
    var r = window.devicePixelRatio || 1;
    c.width = Math.round(w * r); c.height = Math.round(h * r);
    c.style.width = w + "px"; c.style.height = h + "px";
    var g = c.getContext("2d");
    g.setTransform(r, 0, 0, r, 0, 0);
    g.clearRect(0, 0, w, h);
    g.font = "11px system-ui, 'DejaVu Sans', sans-serif";
    return { canvas: c, g: g, w: w, h: h };
  }

  // "Nice" ticks for a linear range.
  function niceTicks(lo, hi, n) {
    if (!(hi > lo)) return [lo];
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    var err = (hi - lo) / n / step;
    if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
    var t = [], v = Math.ceil(lo / step) * step;
    for (; v <= hi + step * 1e-9; v += step) t.push(v);
    return t;
  }

  // Ticks at round multiples of a power of 1024 (for bytes).
  function binaryTicks(hi, n) {
    var unit = 1;
    while (hi / unit >= 1024) unit *= 1024;
    return niceTicks(0, hi / unit, n).map(function (v) { return v * unit; });
  }

  function frame(g, w, h, xTicks, xLabel, yTicks, yLabel) {
    var pw = w - MARGIN.l - MARGIN.r, ph = h - MARGIN.t - MARGIN.b;
    g.strokeStyle = "#ccc"; g.fillStyle = "#333"; g.lineWidth = 1;
    g.textAlign = "center"; g.textBaseline = "top";
    xTicks.forEach(function (t) {
      var x = Math.round(MARGIN.l + t.pos * pw) + 0.5;
      g.beginPath(); g.moveTo(x, MARGIN.t + ph); g.lineTo(x, MARGIN.t + ph + 4); g.stroke();
      g.fillText(t.label, x, MARGIN.t + ph + 6);
    });
    g.textAlign = "right"; g.textBaseline = "middle";
    yTicks.forEach(function (t) {
      var y = Math.round(MARGIN.t + ph - t.pos * ph) + 0.5;
      g.strokeStyle = "#eee";
      g.beginPath(); g.moveTo(MARGIN.l, y); g.lineTo(MARGIN.l + pw, y); g.stroke();
      g.fillText(t.label, MARGIN.l - 5, y);
    });
    g.strokeStyle = "#888";
    g.strokeRect(MARGIN.l + 0.5, MARGIN.t + 0.5, pw, ph);
    g.save(); g.textAlign = "center"; g.textBaseline = "bottom"; g.fillStyle = "#555";
    g.fillText(xLabel, MARGIN.l + pw / 2, h);
    g.translate(9, MARGIN.t + ph / 2); g.rotate(-Math.PI / 2); g.textBaseline = "middle";
    g.fillText(yLabel, 0, 0); g.restore();
    return { pw: pw, ph: ph };
  }

  function timeTicks(zoom) {
    return niceTicks(zoom.lo / 1e9, zoom.hi / 1e9, 10).map(function (s) {
      return { pos: (s * 1e9 - zoom.lo) / (zoom.hi - zoom.lo), label: fmtSec(s * 1e9).replace(/\.00 /, " ") };
    });
  }

  // ---------- zoom shared by the time plots of one trace ----------
  function Zoom(full) {
    this.full = full; this.lo = 0; this.hi = full; this.listeners = [];
  }
  Zoom.prototype.set = function (lo, hi) {
    lo = Math.max(0, lo); hi = Math.min(this.full, hi);
    if (hi - lo < 1) return;
    this.lo = lo; this.hi = hi;
    this.listeners.forEach(function (f) { f(); });
  };
  Zoom.prototype.reset = function () { this.set(0, this.full); };

  // Drag to zoom, double-click to reset, hover callback (plot-relative coordinates).
  function interact(container, zoom, onHover) {
    var c = container.querySelector("canvas");
    var sel = container.querySelector(".sel") || container.appendChild(el("div", { "class": "sel", hidden: "" }));
    var start = null;
    function px(ev) { var r = c.getBoundingClientRect(); return { x: ev.clientX - r.left, y: ev.clientY - r.top }; }
    function tAt(x) {
      var pw = c.clientWidth - MARGIN.l - MARGIN.r;
      return zoom.lo + (Math.min(Math.max(x - MARGIN.l, 0), pw) / pw) * (zoom.hi - zoom.lo);
    }
    c.addEventListener("mousedown", function (ev) { start = px(ev).x; ev.preventDefault(); });
    c.addEventListener("mousemove", function (ev) {
      var p = px(ev);
      if (start !== null) {
        var a = Math.min(start, p.x), b = Math.max(start, p.x);
        sel.hidden = false; sel.style.left = a + "px"; sel.style.width = (b - a) + "px";
        sel.style.height = c.clientHeight - MARGIN.b + "px";
      }
      var pw = c.clientWidth - MARGIN.l - MARGIN.r, ph = c.clientHeight - MARGIN.t - MARGIN.b;
      var fx = (p.x - MARGIN.l) / pw, fy = 1 - (p.y - MARGIN.t) / ph;
      if (fx < 0 || fx > 1 || fy < 0 || fy > 1) { hideTip(); return; }
      var html = onHover(tAt(p.x), fy, fx);
      if (html) showTip(ev, html); else hideTip();
    });
    c.addEventListener("mouseleave", hideTip);
    window.addEventListener("mouseup", function (ev) {
      if (start === null) return;
      var end = px(ev).x, a = Math.min(start, end), b = Math.max(start, end);
      start = null; sel.hidden = true;
      if (b - a > 4) zoom.set(tAt(a), tAt(b));
    });
    c.addEventListener("dblclick", function () { zoom.reset(); });
  }

  // Loss windows: a light red span inside the plot (part "span") and a red mark under the time
  // axis at the end of each window (part "mark").
  function drawLosses(g, trace, zoom, pw, ph, part) {
    (trace.losses || []).forEach(function (l) {
      var a = Math.max(l.start_ns, zoom.lo), b = Math.min(Math.max(l.end_ns, l.start_ns), zoom.hi);
      if (b < zoom.lo || a > zoom.hi) return;
      var x0 = MARGIN.l + (a - zoom.lo) / (zoom.hi - zoom.lo) * pw;
      var x1 = MARGIN.l + (b - zoom.lo) / (zoom.hi - zoom.lo) * pw;
      if (part === "span") {
        g.fillStyle = "rgba(220,0,0,0.10)";
        g.fillRect(x0, MARGIN.t, Math.max(1, x1 - x0), ph);
      } else {
        g.fillStyle = "#d00";
        g.beginPath(); g.moveTo(x1, MARGIN.t + ph); g.lineTo(x1 - 5, MARGIN.t + ph + 8); g.lineTo(x1 + 5, MARGIN.t + ph + 8); g.fill();
      }
    });
  }
  // The I/O that fired a flight recorder's snapshot: an orange line across the plot, labelled.
  function drawTrigger(g, trace, zoom, pw, ph) {
    var t = trace.trigger;
    if (!t || t.at_ns < zoom.lo || t.at_ns > zoom.hi) return;
    var x = MARGIN.l + (t.at_ns - zoom.lo) / (zoom.hi - zoom.lo) * pw;
    g.fillStyle = "#e67e00";
    g.fillRect(x - 1, MARGIN.t, 2, ph);
    g.font = "11px DejaVu Sans, sans-serif";
    g.fillText("trigger", x + 3, MARGIN.t + 11);
  }
  function lossesAt(trace, t0, t1) {
    var n = 0, reasons = {};
    (trace.losses || []).forEach(function (l) {
      if (l.end_ns >= t0 && l.start_ns <= t1) { n += l.count; reasons[l.reason] = 1; }
    });
    return n ? "<br><b style='color:#c00'>lost " + fmtNum(n) + " events</b> (" + esc(Object.keys(reasons).join(", ")) + ")" : "";
  }

  function legend(container, items, onToggle) {
    var lg = el("div", { "class": "legend" });
    items.forEach(function (it, i) {
      var lab = el("label", { title: "click to hide or show" }, [
        el("span", { "class": "sw", style: "background:" + it.color }), document.createTextNode(it.name)]);
      if (!it.on) lab.className = "off";
      lab.addEventListener("click", function () { it.on = !it.on; lab.className = it.on ? "" : "off"; onToggle(i); });
      lg.appendChild(lab);
    });
    container.appendChild(lg);
  }

  // ---------- IOPS / throughput ----------
  function lineChart(box, trace, zoom, kind) {
    var binNs = trace.time.bin_ns, secs = binNs / 1e9;
    var items = trace.series.map(function (s, i) {
      var src = kind === "iops" ? s.ios : s.bytes;
      return { name: s.device + " " + s.op, color: PALETTE[i % PALETTE.length], on: true,
        v: src.map(function (x) { return x / secs; }) };
    });
    var plot = el("div", { "class": "plot" });
    legend(box, items, draw);
    box.appendChild(plot);
    var fmt = kind === "iops" ? fmtNum : function (v) { return fmtBytes(v) + "/s"; };
    function draw() {
      var w = plotWidth(box), h = 260, c = makeCanvas(plot, w, h), g = c.g;
      var i0 = Math.max(0, Math.floor(zoom.lo / binNs)), i1 = Math.min(trace.time.bins - 1, Math.ceil(zoom.hi / binNs));
      var ymax = 0;
      items.forEach(function (it) { if (it.on) for (var i = i0; i <= i1; i++) if (it.v[i] > ymax) ymax = it.v[i]; });
      ymax = ymax > 0 ? ymax * 1.05 : 1;
      var yt = (kind === "iops" ? niceTicks(0, ymax, 5) : binaryTicks(ymax, 5))
        .map(function (v) { return { pos: v / ymax, label: fmt(v) }; });
      var f = frame(g, w, h, timeTicks(zoom), "time since the first I/O", yt, kind === "iops" ? "I/O per second" : "bytes per second");
      g.save(); g.beginPath(); g.rect(MARGIN.l, MARGIN.t, f.pw, f.ph); g.clip();
      drawLosses(g, trace, zoom, f.pw, f.ph, "span");
      drawTrigger(g, trace, zoom, f.pw, f.ph);
      items.forEach(function (it) {
        if (!it.on) return;
        g.strokeStyle = it.color; g.lineWidth = 1.3; g.beginPath();
        for (var i = i0; i <= i1; i++) {
          var t = (i + 0.5) * binNs;
          var x = MARGIN.l + (t - zoom.lo) / (zoom.hi - zoom.lo) * f.pw;
          var y = MARGIN.t + f.ph - it.v[i] / ymax * f.ph;
          if (i === i0) g.moveTo(x, y); else g.lineTo(x, y);
        }
        g.stroke();
      });
      g.restore();
      drawLosses(g, trace, zoom, f.pw, f.ph, "mark");
    }
    draw();
    zoom.listeners.push(draw); redrawers.push(draw);
    interact(plot, zoom, function (t) {
      var i = Math.min(trace.time.bins - 1, Math.max(0, Math.floor(t / binNs)));
      var rows = items.filter(function (it) { return it.on && it.v[i] > 0; })
        .sort(function (a, b) { return b.v[i] - a.v[i]; }).slice(0, 12)
        .map(function (it) { return "<span style='color:" + it.color + "'>■</span> " + esc(it.name) + ": " + fmt(it.v[i]); });
      return "<b>" + fmtSec(i * binNs) + " – " + fmtSec((i + 1) * binNs) + "</b><br>" +
        (rows.length ? rows.join("<br>") : "no I/O") + lossesAt(trace, i * binNs, (i + 1) * binNs);
    });
  }

  // ---------- colour ramp for densities ----------
  var RAMP = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function ramp(f) {
    f = Math.min(1, Math.max(0, f)) * (RAMP.length - 1);
    var i = Math.min(RAMP.length - 2, Math.floor(f)), u = f - i, a = RAMP[i], b = RAMP[i + 1];
    return "rgb(" + Math.round(a[0] + (b[0] - a[0]) * u) + "," + Math.round(a[1] + (b[1] - a[1]) * u) + "," + Math.round(a[2] + (b[2] - a[2]) * u) + ")";
  }

  // Ticks at powers of ten on an axis whose bins have the given edges (ns), one row per bin.
  function logEdgeTicks(edges, fmt) {
    var n = edges.length - 1, ticks = [];
    if (n < 1) return ticks;
    for (var k = 0; k <= 19; k++) {
      var v = Math.pow(10, k);
      for (var j = 0; j < n; j++) {
        var a = edges[j], b = edges[j + 1];
        if (v >= a && v < b) {
          var u = a > 0 ? Math.log(v / a) / Math.log(b / a) : (v - a) / (b - a);
          ticks.push({ pos: (j + u) / n, label: fmt(v) });
          break;
        }
      }
    }
    return ticks;
  }
  function classToggles(box, onChange) {
    var on = { read: true, write: true, other: true };
    var items = ["read", "write", "other"].map(function (c) { return { name: c, color: CLASS_COLORS[c], on: true }; });
    legend(box, items, function (i) { on[items[i].name] = items[i].on; onChange(); });
    return on;
  }

  // ---------- latency heatmap ----------
  function heatmap(box, trace, zoom) {
    var hm = trace.heatmap, edges = hm.latency_edges_ns, L = edges.length - 1, T = hm.time_bins, binNs = hm.bin_ns;
    var on = classToggles(box, draw);
    var plot = el("div", { "class": "plot" });
    box.appendChild(plot);
    var sum = new Float64Array(T * Math.max(L, 1));
    function combine() {
      sum.fill(0);
      hm.classes.forEach(function (c, ci) {
        if (!on[c]) return;
        var a = hm.counts[ci];
        for (var i = 0; i < a.length; i++) sum[i] += a[i];
      });
    }
    function draw() {
      combine();
      var w = plotWidth(box), h = 300, c = makeCanvas(plot, w, h), g = c.g;
      var f = frame(g, w, h, timeTicks(zoom), "time since the first I/O", logEdgeTicks(edges, fmtNs), "latency");
      if (L < 1) return;
      var max = 0;
      for (var i = 0; i < sum.length; i++) if (sum[i] > max) max = sum[i];
      var lmax = Math.log(1 + max) || 1, cw = binNs / (zoom.hi - zoom.lo) * f.pw, ch = f.ph / L;
      g.save(); g.beginPath(); g.rect(MARGIN.l, MARGIN.t, f.pw, f.ph); g.clip();
      g.fillStyle = "#fafafa"; g.fillRect(MARGIN.l, MARGIN.t, f.pw, f.ph);
      var t0 = Math.max(0, Math.floor(zoom.lo / binNs)), t1 = Math.min(T - 1, Math.ceil(zoom.hi / binNs));
      for (var t = t0; t <= t1; t++) {
        var x = MARGIN.l + (t * binNs - zoom.lo) / (zoom.hi - zoom.lo) * f.pw;
        for (var j = 0; j < L; j++) {
          var v = sum[t * L + j];
          if (!v) continue;
          g.fillStyle = ramp(Math.log(1 + v) / lmax);
          g.fillRect(x, MARGIN.t + f.ph - (j + 1) * ch, Math.ceil(cw + 0.5), Math.ceil(ch + 0.5));
        }
      }
      g.restore();
      drawLosses(g, trace, zoom, f.pw, f.ph, "mark");
      g.strokeStyle = "#888"; g.strokeRect(MARGIN.l + 0.5, MARGIN.t + 0.5, f.pw, f.ph);
    }
    draw();
    zoom.listeners.push(draw); redrawers.push(draw);
    interact(plot, zoom, function (t, fy) {
      if (L < 1) return "";
      var i = Math.min(T - 1, Math.max(0, Math.floor(t / binNs))), j = Math.min(L - 1, Math.floor(fy * L));
      return "<b>" + fmtSec(i * binNs) + " – " + fmtSec((i + 1) * binNs) + "</b><br>latency " + fmtNs(edges[j]) + " – " +
        fmtNs(edges[j + 1]) + "<br>" + fmtNum(sum[i * L + j]) + " I/O" + lossesAt(trace, i * binNs, (i + 1) * binNs);
    });
  }

  // ---------- offset over time (seekwatcher's view) ----------
  function offsetPlot(box, trace, zoom) {
    var devs = trace.offsets;
    if (!devs.length) { box.appendChild(el("p", { "class": "empty", text: "no I/O with data" })); return; }
    var cur = 0;
    var ctl = el("div", { "class": "controls" });
    var sel = el("select", { "aria-label": "device" });
    devs.forEach(function (d, i) { sel.appendChild(el("option", { value: String(i), text: d.device + " (" + fmtNum(d.events) + " I/O)" })); });
    sel.addEventListener("change", function () { cur = +sel.value; index(); draw(); });
    ctl.appendChild(document.createTextNode("device ")); ctl.appendChild(sel);
    box.appendChild(ctl);
    var on = classToggles(box, draw);
    var plot = el("div", { "class": "plot" });
    box.appendChild(plot);
    var cells = {}, maxc = 1;
    function index() {
      var d = devs[cur]; cells = {}; maxc = 1;
      ["read", "write", "other"].forEach(function (c, ci) {
        var a = d.cells[c] || [];
        for (var i = 0; i + 2 < a.length; i += 3) {
          var k = a[i] * d.offset_bins + a[i + 1];
          (cells[k] = cells[k] || [0, 0, 0])[ci] += a[i + 2];
          if (a[i + 2] > maxc) maxc = a[i + 2];
        }
      });
    }
    function yRange(d) { return Math.max(1, Math.min(d.offset_bins, Math.ceil(d.max_end_sector / d.sectors_per_bin))); }
    function draw() {
      var d = devs[cur], w = plotWidth(box), h = 320, c = makeCanvas(plot, w, h), g = c.g;
      var rows = yRange(d), top = rows * d.sectors_per_bin * 512;
      var yt = binaryTicks(top, 6).map(function (v) { return { pos: v / top, label: fmtBytes(v) }; });
      var f = frame(g, w, h, timeTicks(zoom), "time since the first I/O", yt, "offset on " + d.device);
      var binNs = d.bin_ns, cw = binNs / (zoom.hi - zoom.lo) * f.pw, ch = f.ph / rows;
      var lmax = Math.log(1 + maxc);
      g.save(); g.beginPath(); g.rect(MARGIN.l, MARGIN.t, f.pw, f.ph); g.clip();
      drawLosses(g, trace, zoom, f.pw, f.ph, "span");
      drawTrigger(g, trace, zoom, f.pw, f.ph);
      ["other", "write", "read"].forEach(function (cl) {
        if (!on[cl]) return;
        var a = d.cells[cl] || [], col = CLASS_COLORS[cl];
        g.fillStyle = col;
        for (var i = 0; i + 2 < a.length; i += 3) {
          var x = MARGIN.l + (a[i] * binNs - zoom.lo) / (zoom.hi - zoom.lo) * f.pw;
          if (x + cw < MARGIN.l || x > MARGIN.l + f.pw) continue;
          g.globalAlpha = 0.25 + 0.75 * Math.log(1 + a[i + 2]) / lmax;
          g.fillRect(x, MARGIN.t + f.ph - (a[i + 1] + 1) * ch, Math.max(1.5, cw), Math.max(1.5, ch));
        }
      });
      g.globalAlpha = 1; g.restore();
      drawLosses(g, trace, zoom, f.pw, f.ph, "mark");
    }
    index(); draw();
    zoom.listeners.push(draw); redrawers.push(draw);
    interact(plot, zoom, function (t, fy) {
      var d = devs[cur], rows = yRange(d);
      var i = Math.min(d.time_bins - 1, Math.max(0, Math.floor(t / d.bin_ns))), o = Math.min(rows - 1, Math.floor(fy * rows));
      var v = cells[i * d.offset_bins + o] || [0, 0, 0], bpb = d.sectors_per_bin * 512;
      return "<b>" + fmtSec(i * d.bin_ns) + " – " + fmtSec((i + 1) * d.bin_ns) + "</b><br>" + esc(d.device) + " offset " +
        fmtBytes(o * bpb) + " – " + fmtBytes((o + 1) * bpb) + "<br>read " + fmtNum(v[0]) + ", write " + fmtNum(v[1]) +
        ", other " + fmtNum(v[2]) + lossesAt(trace, i * d.bin_ns, (i + 1) * d.bin_ns);
    });
  }

  // ---------- latency histogram ----------
  function histogram(box, trace) {
    var hg = trace.latency_histogram, edges = hg.edges_ns, n = edges.length - 1;
    var on = classToggles(box, draw);
    var plot = el("div", { "class": "plot" });
    box.appendChild(plot);
    var total = 0;
    ["read", "write", "other"].forEach(function (c) { (hg.counts[c] || []).forEach(function (v) { total += v; }); });
    function stack(j) {
      var r = [], acc = 0;
      ["read", "write", "other"].forEach(function (c) { var v = on[c] ? (hg.counts[c] || [])[j] || 0 : 0; r.push([c, acc, v]); acc += v; });
      return { parts: r, sum: acc };
    }
    function draw() {
      var w = plotWidth(box), h = 260, c = makeCanvas(plot, w, h), g = c.g;
      var ymax = 0;
      for (var j = 0; j < n; j++) ymax = Math.max(ymax, stack(j).sum);
      ymax = ymax > 0 ? ymax * 1.05 : 1;
      var yt = niceTicks(0, ymax, 5).map(function (v) { return { pos: v / ymax, label: fmtNum(v) }; });
      var f = frame(g, w, h, logEdgeTicks(edges, fmtNs), "latency (log scale; bins at most 12.5 % wide)", yt, "I/O");
      var bw = f.pw / Math.max(n, 1);
      for (j = 0; j < n; j++) {
        stack(j).parts.forEach(function (p) {
          if (!p[2]) return;
          g.fillStyle = CLASS_COLORS[p[0]];
          g.fillRect(MARGIN.l + j * bw, MARGIN.t + f.ph - (p[1] + p[2]) / ymax * f.ph, Math.max(1, bw - 0.5), p[2] / ymax * f.ph);
        });
      }
    }
    draw();
    redrawers.push(draw);
    var c = plot.querySelector("canvas");
    c.addEventListener("mousemove", function (ev) {
      var r = c.getBoundingClientRect(), pw = c.clientWidth - MARGIN.l - MARGIN.r;
      var j = Math.floor((ev.clientX - r.left - MARGIN.l) / pw * n);
      if (j < 0 || j >= n) { hideTip(); return; }
      var below = 0;
      for (var k = 0; k <= j; k++) ["read", "write", "other"].forEach(function (cl) { below += (hg.counts[cl] || [])[k] || 0; });
      var s = stack(j);
      showTip(ev, "<b>" + fmtNs(edges[j]) + " – " + fmtNs(edges[j + 1]) + "</b><br>" + s.parts.map(function (p) {
        return "<span style='color:" + CLASS_COLORS[p[0]] + "'>■</span> " + p[0] + ": " + fmtNum(p[2]);
      }).join("<br>") + "<br>" + (total ? (100 * below / total).toFixed(3) : "0") + " % of I/O at or below");
    });
    c.addEventListener("mouseleave", hideTip);
  }

  // ---------- top processes / files ----------
  function bars(box, rows, labelOf, total, what) {
    if (!rows.length) { box.appendChild(el("p", { "class": "empty", text: "none" })); return; }
    var max = Math.max.apply(null, rows.map(function (r) { return r.ios; })) || 1;
    var grid = el("div", { "class": "bars", "data-rows": String(rows.length) });
    rows.forEach(function (r) {
      var title = labelOf(r) + "\n" + fmtNum(r.ios) + " I/O, read " + fmtBytes(r.read_bytes) + ", written " +
        fmtBytes(r.write_bytes) + ", mean latency " + fmtNs(r.latency_mean_ns);
      var tot = r.read_bytes + r.write_bytes, wfrac = r.ios / max;
      var track = el("div", { "class": "track", title: title });
      // The bar's length is the I/O count; its colours split it by bytes read and written.
      var rd = tot ? r.read_bytes / tot : 0;
      track.appendChild(el("div", { "class": "bar", style: "width:" + (wfrac * 100 * rd) + "%;background:" + CLASS_COLORS.read }));
      track.appendChild(el("div", { "class": "bar", style: "left:" + (wfrac * 100 * rd) + "%;width:" + (wfrac * 100 * (1 - rd)) + "%;background:" + (tot ? CLASS_COLORS.write : CLASS_COLORS.other) }));
      grid.appendChild(el("div", { "class": "label", title: title }, [el("bdi", { text: labelOf(r) })]));
      grid.appendChild(track);
      grid.appendChild(el("div", { "class": "val", text: fmtNum(r.ios) + " I/O · R " + fmtBytes(r.read_bytes) + " · W " + fmtBytes(r.write_bytes) + " · " + fmtNs(r.latency_mean_ns) }));
    });
    box.appendChild(grid);
    box.appendChild(el("p", { "class": "hint", text: "Bar length: I/Os; colours: share of bytes read (blue) and written (red). " + rows.length + " of " + fmtNum(total) + " " + what + "." }));
  }

  // ---------- summary ----------
  function kvTable(rows) {
    var t = el("table");
    rows.forEach(function (r) { t.appendChild(el("tr", null, [el("th", { text: r[0] }), el("td", { text: r[1] })])); });
    return t;
  }
  function gridTable(head, rows, numeric) {
    var t = el("table", { "class": "grid" });
    t.appendChild(el("tr", null, head.map(function (h, i) { return el("th", { text: h, "class": numeric[i] ? "num" : "" }); })));
    rows.forEach(function (r) {
      t.appendChild(el("tr", null, r.map(function (v, i) { return el("td", { text: v, "class": numeric[i] ? "num" : "" }); })));
    });
    return t;
  }
  function summary(box, tr) {
    // A rate over no time (one I/O, or all at one instant) is undefined: "-".
    var spanS = tr.span_ns / 1e9, h = tr.header, lat = tr.latency;
    var perS = function (v) { return spanS > 0 ? v / spanS : null; };
    var lostPct = tr.events + tr.lost_events ? (100 * tr.lost_events / (tr.events + tr.lost_events)).toFixed(3) + " %" : "0 %";
    var rows = [
      ["trace", tr.name + " (" + fmtBytes(tr.file_bytes) + ")"],
      ["host", (h.hostname || "?") + ", kernel " + (h.kernel_release || "?")],
      ["recorded by", h.tool_version || "?"],
    ];
    if (h.command) rows.push(["command", h.command.join(" ")]);
    (h.metadata || []).forEach(function (kv) { rows.push(["meta " + kv[0], kv[1]]); });
    if (tr.filter) rows.push(["filter", tr.filter.expression + " (" + fmtNum(tr.filter.left_out) + " I/Os left out)"]);
    rows.push(["first I/O", utc(tr.start_utc_ns)], ["duration", fmtSec(tr.span_ns)],
      ["I/Os", fmtNum(tr.events) + " (" + tr.events + ")"],
      ["lost events", tr.lost_events + " (" + lostPct + ")"],
      ["bytes", fmtBytes(tr.bytes)],
      ["mean IOPS", fmtNum(perS(tr.events))],
      ["mean throughput", spanS > 0 ? fmtBytes(perS(tr.bytes)) + "/s" : "-"],
      ["latency", "mean " + fmtNs(lat.mean_ns) + ", p50 " + fmtNs(lat.p50_ns) + ", p90 " + fmtNs(lat.p90_ns) + ", p99 " +
        fmtNs(lat.p99_ns) + ", p99.9 " + fmtNs(lat.p999_ns) + ", max " + fmtNs(lat.max_ns)],
      ["I/O errors", String(tr.errors)],
      ["processes, files", fmtNum(tr.process_count) + " processes, " + fmtNum(tr.file_count) + " files or labels"]);
    var wrap = el("div", { "class": "tables" });
    wrap.appendChild(kvTable(rows));
    var right = el("div");
    right.appendChild(gridTable(["op", "I/Os", "bytes", "mean latency", "max latency"], tr.ops.map(function (o) {
      return [o.op, fmtNum(o.events), fmtBytes(o.bytes), fmtNs(o.latency_mean_ns), fmtNs(o.latency_max_ns)];
    }), [0, 1, 1, 1, 1]));
    right.appendChild(gridTable(["device", "dev", "I/Os", "bytes"], tr.devices.map(function (d) {
      return [d.name, d.dev, fmtNum(d.events), fmtBytes(d.bytes)];
    }), [0, 0, 1, 1]));
    wrap.appendChild(right);
    box.appendChild(wrap);
    if (tr.stack && tr.stack.length) {
      // What each stacked device (LVM, dm-crypt, md) sent to the devices below it.
      var st = gridTable(["stacked device", "→ device below", "its I/Os", "I/Os sent down", "per upper I/O",
        "bytes sent down", "upper mean latency", "lower mean latency"], tr.stack.map(function (s) {
        return [s.upper, s.lower, fmtNum(s.upper_ios), fmtNum(s.lower_ios),
          s.lower_ios_per_upper_io === null ? "-" : s.lower_ios_per_upper_io.toFixed(2),
          fmtBytes(s.lower_bytes), s.upper_ios ? fmtNs(s.upper_latency_mean_ns) : "-", fmtNs(s.lower_latency_mean_ns)];
      }), [0, 0, 1, 1, 1, 1, 1, 1]);
      st.setAttribute("data-stack", String(tr.stack.length));
      box.appendChild(el("h4", { text: "Stacked devices: I/O sent to the devices below" }));
      box.appendChild(st);
    }
    if (tr.damage.length) {
      box.appendChild(el("div", { "class": "warn", text: "Damaged trace: " + tr.damage.length + " damaged chunk(s) skipped" +
        (tr.damaged_events ? " (" + tr.damaged_events + " events in damaged segments)" : "") +
        "; the plots show what could be decoded. First: " + tr.damage[0] }));
    }
    if (tr.lost_events) {
      box.appendChild(el("div", { "class": "warn", text: tr.lost_events + " events were lost while recording (" +
        tr.losses.length + " loss records); red marks on the time axes show when." }));
    }
  }

  function section(parent, id, title, kind, fn) {
    var box = el("section", { "class": "chart", id: id, "data-plot": kind });
    box.appendChild(el("h3", { text: title }));
    parent.appendChild(box);
    fn(box);
    box.setAttribute("data-drawn", "1");
    plotsDrawn++;
  }

  function render() {
    var main = document.getElementById("report");
    main.innerHTML = "";
    if (!DATA.traces || !DATA.traces.length) { main.appendChild(el("p", { "class": "empty", text: "no traces" })); }
    DATA.traces.forEach(function (tr, ti) {
      var sec = el("section", { "class": "trace", id: "trace-" + ti, "data-events": String(tr.events) });
      sec.appendChild(el("h2", { text: tr.name }));
      main.appendChild(sec);
      var zoom = new Zoom(Math.max(tr.span_ns, tr.time.bin_ns));
      var p = "t" + ti + "-";
      section(sec, p + "summary", "Summary", "summary", function (b) { summary(b, tr); });
      if (!tr.events) {
        sec.appendChild(el("p", { "class": "empty", text: tr.filter && !tr.damage.length ? "the filter keeps no I/O of this trace" : "no I/O could be read from this trace" }));
        return;
      }
      if (tr.span_ns > 0) {
        section(sec, p + "iops", "IOPS over time, per device and op", "iops", function (b) { lineChart(b, tr, zoom, "iops"); });
        section(sec, p + "throughput", "Throughput over time, per device and op", "throughput", function (b) { lineChart(b, tr, zoom, "throughput"); });
      } else {
        // One I/O, or all at one instant: a rate over no time is undefined (a bin of 1 ns
        // would draw it at a billion per second).
        sec.appendChild(el("p", { "class": "empty", text: "all of its I/O at one instant: no IOPS or throughput over time" }));
      }
      section(sec, p + "latency-heatmap", "Latency over time (colour: number of I/Os, log scale)", "latency-heatmap", function (b) { heatmap(b, tr, zoom); });
      section(sec, p + "offset", "Offset over time (seekwatcher's view; opacity: number of I/Os)", "offset", function (b) { offsetPlot(b, tr, zoom); });
      section(sec, p + "latency-histogram", "Latency histogram", "latency-histogram", function (b) { histogram(b, tr); });
      section(sec, p + "top-procs", "Top processes by I/Os", "top-procs", function (b) {
        bars(b, tr.top_processes, function (r) { return (r.args || r.comm) + " [" + r.pid + "]"; }, tr.process_count, "processes");
      });
      section(sec, p + "top-files", "Top files by I/Os", "top-files", function (b) {
        bars(b, tr.top_files, function (r) {
            if (r.renamed_from) return r.path + " (renamed from " + r.renamed_from + ")";
            // A label (one per device) with its device: "[journal] sda1".
            return r.path.charAt(0) === "[" && r.device ? r.path + " " + r.device : r.path;
        }, tr.file_count, "files and labels");
      });
    });
    var t;
    window.addEventListener("resize", function () {
      clearTimeout(t);
      t = setTimeout(function () { redrawers.forEach(function (f) { f(); }); }, 150);
    });
    document.body.setAttribute("data-plots", String(plotsDrawn));
    if (!window.iodumpErrors.length) document.body.setAttribute("data-rendered", "ok");
  }

  render();
})();
