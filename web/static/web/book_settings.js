// Tag suggestions on the book settings page: the datalist completes the tag being typed (after the
// last comma) while keeping the ones before it.
(function () {
  "use strict";
  function wire(input) {
    var list = document.getElementById(input.getAttribute("list"));
    if (!list) { return; }
    var all = Array.prototype.map.call(list.options, function (o) { return o.value; });
    input.addEventListener("input", function () {
      var value = input.value;
      var cut = value.lastIndexOf(",");
      var head = cut >= 0 ? value.slice(0, cut + 1) + " " : "";
      var typed = (cut >= 0 ? value.slice(cut + 1) : value).trim().toLowerCase();
      var chosen = value.split(",").map(function (t) { return t.trim().toLowerCase(); });
      list.textContent = "";
      all.filter(function (t) {
        return t.toLowerCase().indexOf(typed) === 0 && chosen.indexOf(t.toLowerCase()) < 0;
      }).slice(0, 50).forEach(function (t) {
        var option = document.createElement("option");
        option.value = head + t;
        list.appendChild(option);
      });
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("input[data-tags]").forEach(wire);
  });
})();
