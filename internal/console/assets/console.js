// pactledger console: local time beside each UTC time, copy buttons and
// busy states. Everything works without it except copying.
(function () {
  "use strict";

  function localTimes() {
    document.querySelectorAll("time.utc").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime()) || el.nextElementSibling && el.nextElementSibling.classList.contains("local")) {
        return;
      }
      var s = document.createElement("span");
      s.className = "local";
      s.textContent = d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }) + " local";
      el.insertAdjacentElement("afterend", s);
    });
  }

  function copied(button, ok) {
    var was = button.textContent;
    button.textContent = ok ? "Copied" : "Select and copy";
    button.classList.toggle("done", ok);
    window.setTimeout(function () { button.textContent = was; button.classList.remove("done"); }, 1500);
  }

  function fallbackCopy(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    try { return document.execCommand("copy"); } catch (e) { return false; }
  }

  function copyButtons() {
    document.querySelectorAll("button[data-copy]").forEach(function (b) {
      b.addEventListener("click", function () {
        var el = document.getElementById(b.getAttribute("data-copy"));
        if (!el) { return; }
        var text = el.textContent.trim();
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(text).then(function () { copied(b, true); }, function () { copied(b, fallbackCopy(el)); });
        } else {
          copied(b, fallbackCopy(el));
        }
      });
    });
  }

  function busyForms() {
    document.querySelectorAll("form[data-busy]").forEach(function (f) {
      f.addEventListener("submit", function () {
        var b = f.querySelector("button[type=submit]");
        if (!b) { return; }
        b.textContent = f.getAttribute("data-busy");
        b.classList.add("busy");
        b.setAttribute("aria-busy", "true");
        window.setTimeout(function () { b.disabled = true; }, 0);
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.documentElement.classList.add("js");
    localTimes();
    copyButtons();
    busyForms();
  });
})();
