// Progressive help for the console; every page works without it.
"use strict";
document.addEventListener("click", (event) => {
  const button = event.target.closest("button.copy");
  if (!button) return;
  const text = document.getElementById(button.dataset.copy)?.textContent ?? "";
  navigator.clipboard?.writeText(text).then(() => { button.textContent = "Copied"; });
});
// Sortable tables: a click or Enter on a column heading sorts by it (data-sort, else the text).
for (const table of document.querySelectorAll("table.sortable")) {
  table.querySelectorAll("thead th").forEach((th, column) => {
    th.classList.add("sort");
    th.tabIndex = 0;
    th.setAttribute("aria-sort", "none");
    const sort = () => {
      const ascending = th.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("thead th").forEach((h) => h.setAttribute("aria-sort", "none"));
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const body = table.tBodies[0];
      const key = (row) => row.cells[column]?.dataset.sort ?? row.cells[column]?.textContent ?? "";
      const rows = [...body.rows].sort((a, b) =>
        key(a).localeCompare(key(b), undefined, { numeric: true }) * (ascending ? 1 : -1));
      body.append(...rows);
    };
    th.addEventListener("click", sort);
    th.addEventListener("keydown", (e) => { if (e.key === "Enter") sort(); });
  });
}
