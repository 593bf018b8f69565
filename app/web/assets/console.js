// The licensor console's one script: progressive, the pages work without it.
// - a button with data-copy="ID" copies the text of element ID;
// - a form with data-confirm="…" asks before it is sent.
"use strict";
document.addEventListener("click", function (ev) {
  var button = ev.target.closest("[data-copy]");
  if (!button) return;
  var source = document.getElementById(button.getAttribute("data-copy"));
  if (!source) return;
  var text = source.value !== undefined ? source.value : source.textContent;
  var done = function () { button.textContent = "Copied"; };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, function () { source.select(); });
  } else if (source.select) {
    source.select();
    document.execCommand("copy");
    done();
  }
});
document.addEventListener("submit", function (ev) {
  var message = ev.target.getAttribute("data-confirm");
  if (message && !window.confirm(message)) ev.preventDefault();
});
