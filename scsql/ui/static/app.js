// scsql ui: the live timeline (server-sent events), the cost charts (uPlot)
// and the audit page's verification, each read from /api/v1 as JSON and put
// on the page with textContent only: no stored text is ever parsed as HTML.
"use strict";

(function () {
  function cell(tr, text, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text == null ? "" : String(text);
    tr.appendChild(td);
    return td;
  }

  function when(iso) {
    return iso ? iso.replace("T", " ").slice(0, 19) : "-";
  }

  function key(cursor) {
    return cursor.split(".").map(function (x) { return parseInt(x, 10); });
  }

  function before(a, b) {
    var x = key(a), y = key(b);
    for (var i = 0; i < 3; i++) { if (x[i] !== y[i]) return x[i] < y[i]; }
    return false;
  }

  function timelineRow(r, project) {
    var tr = document.createElement("tr");
    tr.className = "k-" + r.kind + " fresh" + (r.quarantine ? " quarantined" : "") +
      ((r.kind === "tool" || r.kind === "outcome") && r.status && ["ok", "shipped", "accepted"].indexOf(r.status) < 0 ? " failed" : "");
    tr.dataset.cursor = r.cursor;
    tr.dataset.ref = r.ref;
    cell(tr, when(r.happened), "t");
    cell(tr, r.kind);
    var who = cell(tr, (r.author || "-") + " ");
    var pos = document.createElement("span");
    pos.className = "sub";
    pos.textContent = "#" + r.chain_id + ":" + r.seq;
    who.appendChild(pos);
    cell(tr, r.status || "", "status");
    var what = cell(tr, "", "what");
    var strong = document.createElement("strong");
    strong.textContent = r.title || "";
    what.appendChild(strong);
    if (r.preview) {
      var details = document.createElement("details");
      var summary = document.createElement("summary");
      summary.textContent = r.preview.slice(0, 120);
      var pre = document.createElement("pre");
      pre.textContent = r.preview + (r.more ? "…" : "");
      details.appendChild(summary);
      details.appendChild(pre);
      what.appendChild(details);
    }
    cell(tr, r.duration_ms == null ? "" : r.duration_ms, "n");
    cell(tr, (r.files || []).join("\n"), "files");
    cell(tr, r.input_tokens == null ? "" : r.input_tokens + " / " + r.output_tokens, "n");
    cell(tr, r.cost_usd == null ? "" : "$" + Number(r.cost_usd).toFixed(4), "n");
    var link = cell(tr, "");
    var a = document.createElement("a");
    var kind = r.ref.split(":")[0];
    a.href = (["chunk", "source", "fact"].indexOf(kind) >= 0 ? "/source" : "/event") +
      "?" + new URLSearchParams({ ref: r.ref, project: project }).toString();
    a.textContent = "source";
    link.appendChild(a);
    return tr;
  }

  function live(table) {
    var tbody = table.tBodies[0];
    var project = table.dataset.project || "";
    var state = document.getElementById("live-state");
    var source = new EventSource(table.dataset.live);
    source.addEventListener("row", function (ev) {
      var r = JSON.parse(ev.data);
      if (tbody.querySelector('tr[data-ref="' + CSS.escape(r.ref) + '"]')) return;
      var tr = timelineRow(r, project);
      var rows = tbody.rows, at = null;
      for (var i = rows.length - 1; i >= 0; i--) {
        if (!rows[i].dataset.cursor || !before(r.cursor, rows[i].dataset.cursor)) break;
        at = rows[i];
      }
      tbody.insertBefore(tr, at);
      if (state) state.textContent = "live: " + when(r.happened) + " " + r.kind + " " + (r.title || "");
    });
    source.addEventListener("failure", function (ev) {
      if (state) state.textContent = "live timeline stopped: " + JSON.parse(ev.data).message;
      source.close();
    });
  }

  function chart(div) {
    fetch(div.dataset.src, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (rows) {
      if (!Array.isArray(rows) || typeof uPlot === "undefined") return;
      var xs = rows.map(function (r) { return Date.parse(r.key + "T00:00:00Z") / 1000; });
      var series = [{}], data = [xs];
      if (div.dataset.field === "tokens") {
        [["input", "input_tokens", "#2e5aac"], ["output", "output_tokens", "#067647"], ["cache", null, "#b54708"]].forEach(function (s) {
          series.push({ label: s[0], stroke: s[2], width: 2 });
          data.push(rows.map(function (r) { return s[1] ? r[s[1]] : r.cache_write_tokens + r.cache_read_tokens; }));
        });
      } else {
        series.push({ label: "USD", stroke: "#2e5aac", fill: "rgba(46,90,172,0.12)", width: 2 });
        data.push(rows.map(function (r) { return r.cost_usd; }));
      }
      new uPlot({ width: Math.max(420, div.clientWidth || 420), height: 220, series: series,
                  axes: [{}, { size: 70 }], scales: { x: { time: true } } }, data, div);
      div.dataset.drawn = "1";
    });
  }

  function verify(table) {
    fetch(table.dataset.verify, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (rows) {
      if (!Array.isArray(rows)) return;
      rows.forEach(function (v) {
        var tr = table.querySelector('tr[data-chain="' + v.chain_id + '"]');
        if (!tr) return;
        var td = tr.querySelector("td.verify");
        td.textContent = v.ok ? "ok (" + v.rows_checked + " rows)" : "break at seq " + v.broken_seq + ": " + v.kind;
        if (!v.ok) td.className = "verify bad";
      });
      table.dataset.verified = "1";
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var t = document.getElementById("timeline");
    if (t && t.dataset.live) live(t);
    document.querySelectorAll(".chart[data-src]").forEach(chart);
    var c = document.getElementById("chain-table");
    if (c && c.dataset.verify) verify(c);
  });
})();
