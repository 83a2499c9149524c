// iodump report --diff: draws the comparison embedded in this page (latency CDFs, IOPS and
// throughput timelines of A and B, the table of the largest changes) on canvases. No
// external code: everything the page needs is in it.
"use strict";
(function () {
  var DATA = JSON.parse(document.getElementById("iodump-data").textContent);
  var COLORS = { a: "#1f77b4", b: "#d62728" };
  var M = { l: 80, r: 16, t: 10, b: 36 };
  var drawn = 0;

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "text") e.textContent = attrs[k]; else e.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) { e.appendChild(c); });
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(2) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(2) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
    if (a >= 100 || v === Math.round(v)) return String(Math.round(v));
    return v.toFixed(2);
  }
  function fmtNs(ns) {
    if (ns >= 1e9) return (ns / 1e9).toFixed(2) + " s";
    if (ns >= 1e6) return (ns / 1e6).toFixed(2) + " ms";
    if (ns >= 1e3) return (ns / 1e3).toFixed(1) + " µs";
    return Math.round(ns) + " ns";
  }

  // A line chart of the series [{key, points: [[x, y]...]}] on a new canvas.
  function chart(id, title, series, opts) {
    var box = el("section", { "class": "plot" });
    box.appendChild(el("h3", { text: title }));
    var c = el("canvas", { width: "1000", height: "320", "data-plot": id });
    box.appendChild(c);
    var ctx = c.getContext("2d");
    var W = c.width, H = c.height, pw = W - M.l - M.r, ph = H - M.t - M.b;
    var xs = [], ys = [];
    series.forEach(function (s) { s.points.forEach(function (p) { xs.push(opts.xlog ? Math.log10(Math.max(p[0], 1)) : p[0]); ys.push(p[1]); }); });
    var x0 = opts.xlog ? Math.min.apply(null, xs) : 0;
    var x1 = Math.max.apply(null, xs.concat([x0 + 1e-9]));
    var y1 = opts.ymax || Math.max.apply(null, ys.concat([1e-9]));
    function X(v) { var t = opts.xlog ? Math.log10(Math.max(v, 1)) : v; return M.l + (t - x0) / (x1 - x0) * pw; }
    function Y(v) { return M.t + ph - v / y1 * ph; }
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
    ctx.strokeStyle = "#999"; ctx.strokeRect(M.l, M.t, pw, ph);
    ctx.fillStyle = "#333"; ctx.font = "12px sans-serif";
    for (var i = 0; i <= 4; i++) {
      var yv = y1 * i / 4;
      ctx.fillText(opts.yfmt(yv), 4, Y(yv) + 4);
      var xv = x0 + (x1 - x0) * i / 4;
      ctx.fillText(opts.xfmt(opts.xlog ? Math.pow(10, xv) : xv), M.l + pw * i / 4 - (i === 4 ? 60 : 20), H - 14);
    }
    series.forEach(function (s) {
      ctx.strokeStyle = COLORS[s.key]; ctx.lineWidth = 1.5; ctx.beginPath();
      s.points.forEach(function (p, k) { if (k === 0) ctx.moveTo(X(p[0]), Y(p[1])); else ctx.lineTo(X(p[0]), Y(p[1])); });
      ctx.stroke();
    });
    ctx.fillStyle = COLORS.a; ctx.fillText("A " + DATA.a.name, M.l + 8, M.t + 14);
    ctx.fillStyle = COLORS.b; ctx.fillText("B " + DATA.b.name, M.l + 8, M.t + 30);
    c.setAttribute("data-drawn", "1");
    drawn++;
    return box;
  }

  // All of a side's I/O at one instant (one I/O): a rate over no time is undefined (its bin
  // of 1 ns would draw it at a billion per second), so it has no timeline.
  function instant(side) { return side.duration_ns === 0; }
  function timeline(side, field) {
    if (instant(side)) return [];
    var secs = side.bin_ns / 1e9;
    return side[field].map(function (v, i) { return [i * secs, v / secs]; });
  }

  // The report's page: this one's heading and hint.
  document.title = "iodump diff: " + DATA.a.name + " vs " + DATA.b.name;
  document.querySelector("header h1").textContent = "iodump diff";
  document.querySelector("header .hint").textContent = "A (the baseline) in blue, B in red; " +
    "timelines aligned at each recording's first I/O. The table lists the largest changes, " +
    "significant ones first (README, iodump diff).";
  var main = document.getElementById("report");
  main.innerHTML = "";
  var sum = el("table", { "class": "summary" });
  [["", "A (baseline)", "B"],
   ["trace", DATA.a.name, DATA.b.name],
   ["I/Os", fmt(DATA.a.events), fmt(DATA.b.events)],
   ["duration", fmtNs(DATA.a.duration_ns), fmtNs(DATA.b.duration_ns)]].forEach(function (r, i) {
    sum.appendChild(el("tr", null, r.map(function (c) { return el(i === 0 ? "th" : "td", { text: c }); })));
  });
  main.appendChild(sum);
  main.appendChild(chart("latency-cdf", "Latency CDF (all I/O)", [
    { key: "a", points: DATA.a.latency_cdf }, { key: "b", points: DATA.b.latency_cdf }],
    { xlog: true, ymax: 1, xfmt: fmtNs, yfmt: function (v) { return (v * 100).toFixed(0) + "%"; } }));
  var still = [["A", DATA.a], ["B", DATA.b]].filter(function (s) { return instant(s[1]); });
  if (still.length < 2) {
    main.appendChild(chart("iops", "IOPS over time (from each recording's start)", [
      { key: "a", points: timeline(DATA.a, "ios") }, { key: "b", points: timeline(DATA.b, "ios") }],
      { xfmt: function (v) { return v.toFixed(1) + " s"; }, yfmt: fmt }));
    main.appendChild(chart("throughput", "Throughput over time, bytes/s", [
      { key: "a", points: timeline(DATA.a, "bytes") }, { key: "b", points: timeline(DATA.b, "bytes") }],
      { xfmt: function (v) { return v.toFixed(1) + " s"; }, yfmt: fmt }));
  }
  still.forEach(function (s) {
    main.appendChild(el("p", { "class": "empty", text: s[0] + " (" + s[1].name +
      "): all of its I/O at one instant: no IOPS or throughput over time" }));
  });
  var t = el("table", { "class": "changes", "data-rows": String(DATA.rows.length) });
  t.appendChild(el("tr", null, DATA.columns.map(function (c) { return el("th", { text: c }); })));
  DATA.rows.forEach(function (r) {
    var tr = el("tr", r[7] === "yes" ? { "class": "significant" } : null,
      r.map(function (c) { return el("td", { text: c === null ? "-" : c }); }));
    t.appendChild(tr);
  });
  main.appendChild(el("h3", { text: "Largest changes" }));
  main.appendChild(t);
  document.documentElement.setAttribute("data-plots", String(drawn));
  document.documentElement.setAttribute("data-rendered", "ok");
})();
