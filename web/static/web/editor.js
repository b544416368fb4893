// Drag an entry row onto another to move it there (the server's entry_move, as the buttons do).
// The top/bottom buttons stay the keyboard way; rows are draggable only in list order.
document.addEventListener("dragstart", (event) => {
  const row = event.target.closest && event.target.closest("tr[data-move]");
  if (row) event.dataTransfer.setData("text/plain", row.dataset.move);
});
document.addEventListener("dragover", (event) => {
  if (event.target.closest && event.target.closest("tr[data-move]")) event.preventDefault();
});
document.addEventListener("drop", async (event) => {
  const target = event.target.closest && event.target.closest("tr[data-move]");
  const url = event.dataTransfer.getData("text/plain");
  if (!target || !url || url === target.dataset.move) return;
  event.preventDefault();
  const token = document.querySelector("#entries-form input[name=csrfmiddlewaretoken]").value;
  const body = new URLSearchParams({ position: target.dataset.position });
  await fetch(url, { method: "POST", body, headers: { "X-CSRFToken": token }, redirect: "manual" });
  window.location.reload();
});
