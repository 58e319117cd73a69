// report.html: filters (applied from and written to the URL's hash, e.g.
// #aspect=wire&verdict=differs&entry=D3&kind=random&open=len-1) and the side-by-side traces of
// a scenario, built from the JSON embedded in the page when its row is opened.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("data").textContent);
  var rows = Array.prototype.slice.call(document.querySelectorAll("#matrix tr.sc"));
  var f = {
    aspect: document.getElementById("f-aspect"),
    verdict: document.getElementById("f-verdict"),
    entry: document.getElementById("f-entry"),
    kind: document.getElementById("f-kind"),
    text: document.getElementById("f-text")
  };
  var names = ["aspect", "verdict", "entry", "kind", "text"];

  function readHash() {
    var h = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) { h[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1)); }
    });
    return h;
  }

  function writeHash(open) {
    var parts = [];
    names.forEach(function (n) { if (f[n].value) { parts.push(n + "=" + encodeURIComponent(f[n].value)); } });
    if (open) { parts.push("open=" + encodeURIComponent(open)); }
    history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname);
  }

  function matches(tr) {
    var a = f.aspect.value, v = f.verdict.value, e = f.entry.value, k = f.kind.value;
    var t = f.text.value.trim().toLowerCase();
    var verdict = a ? tr.getAttribute("data-a-" + a) : tr.getAttribute("data-v");
    var entries = (a ? tr.getAttribute("data-x-" + a) : tr.getAttribute("data-e")) || "";
    if (v && verdict !== v) { return false; }
    if (e && entries.split(" ").indexOf(e) < 0) { return false; }
    if (k && tr.getAttribute("data-kind") !== k) { return false; }
    if (t && tr.getAttribute("data-id").toLowerCase().indexOf(t) < 0) { return false; }
    return true;
  }

  function apply() {
    var shown = 0;
    rows.forEach(function (tr) {
      var ok = matches(tr);
      if (ok) { tr.removeAttribute("hidden"); shown += 1; } else { tr.setAttribute("hidden", ""); }
      var d = tr.nextElementSibling;
      if (d && d.classList.contains("detail")) {
        if (ok) { d.removeAttribute("hidden"); } else { d.setAttribute("hidden", ""); }
      }
    });
    document.getElementById("shown").textContent = String(shown);
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = text; }
    return e;
  }

  var tagClass = { "=": "t-s", "-": "t-m", "+": "t-p", "~": "t-c" };

  function detail(id) {
    var s = data.scenarios[id];
    var box = el("div");
    if (!s) { box.appendChild(el("p", "small", "No trace: the scenario was not compared.")); return box; }
    if (s.reason) { box.appendChild(el("p", "fail", s.reason)); }
    if (s.replay) { box.appendChild(el("p", "small mono", "replay: " + s.replay)); }
    var ul = el("ul", "why");
    s.aspects.forEach(function (v) {
      if (v[1] === "same") { return; }
      var li = el("li", v[1] === "FAIL" ? "fail" : "differs");
      li.appendChild(el("b", null, data.titles[v[0]] + ": "));
      li.appendChild(document.createTextNode(v[1] === "FAIL" ? "FAIL: no applicable ledger entry explains it" : "differs as documented"));
      v[2].forEach(function (d) {
        var L = data.ledger[d] || { title: "" };
        li.appendChild(el("div", "small", d + ": " + L.title));
      });
      ul.appendChild(li);
    });
    if (!ul.children.length) { box.appendChild(el("p", "same", "Every aspect identical on both libraries.")); } else { box.appendChild(ul); }
    var lbl = el("label", "small");
    var cb = el("input");
    cb.type = "checkbox";
    cb.checked = ul.children.length > 0;
    lbl.appendChild(cb);
    lbl.appendChild(document.createTextNode(" only differing lines"));
    box.appendChild(lbl);
    var wrap = el("div", cb.checked ? "hide-same" : "");
    cb.addEventListener("change", function () { wrap.className = cb.checked ? "hide-same" : ""; });
    var t = el("table", "sbs");
    var cg = el("colgroup");
    cg.appendChild(el("col", "asp"));
    cg.appendChild(el("col"));
    cg.appendChild(el("col"));
    t.appendChild(cg);
    var h = el("tr");
    ["aspect", "C reference (legacy)", "Rust"].forEach(function (x) { h.appendChild(el("th", null, x)); });
    t.appendChild(h);
    s.sections.forEach(function (sec) {
      var any = sec[1].some(function (r) { return r[0] !== "="; });
      var tr = el("tr", "sec" + (any ? "" : " t-s"));
      var td = el("td", null, "## " + sec[0] + (any ? "  (differs)" : ""));
      td.colSpan = 3;
      tr.appendChild(td);
      t.appendChild(tr);
      sec[1].forEach(function (r) {
        var row = el("tr", tagClass[r[0]] + " asp-" + r[3]);
        row.appendChild(el("td", "asp", r[0] === "=" ? "" : data.titles[r[3]]));
        row.appendChild(el("td", "l", r[1]));
        row.appendChild(el("td", "r", r[0] === "=" ? r[1] : r[2]));
        t.appendChild(row);
      });
    });
    wrap.appendChild(t);
    box.appendChild(wrap);
    return box;
  }

  function toggle(tr, force) {
    var next = tr.nextElementSibling;
    var isOpen = next && next.classList.contains("detail");
    if (isOpen && force !== true) {
      next.parentNode.removeChild(next);
      tr.classList.remove("open");
      writeHash(null);
      return;
    }
    if (isOpen) { return; }
    var d = el("tr", "detail");
    var td = el("td");
    td.colSpan = tr.children.length;
    td.appendChild(detail(tr.getAttribute("data-id")));
    d.appendChild(td);
    tr.parentNode.insertBefore(d, tr.nextSibling);
    tr.classList.add("open");
    writeHash(tr.getAttribute("data-id"));
  }

  rows.forEach(function (tr) { tr.addEventListener("click", function () { toggle(tr); }); });
  names.forEach(function (n) {
    f[n].addEventListener(n === "text" ? "input" : "change", function () { apply(); writeHash(null); });
  });

  function fromHash() {
    var h = readHash();
    names.forEach(function (n) { f[n].value = h[n] || ""; });
    apply();
    if (h.open) {
      var tr = document.getElementById("s-" + h.open);
      if (tr) { toggle(tr, true); tr.scrollIntoView({ block: "nearest" }); }
    }
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
  document.body.setAttribute("data-ready", "1");
}());
