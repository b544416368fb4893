// Behaviour every page shares, from a file: the Content-Security-Policy allows no inline script.

// "Back" links (data-back) return to the previous page; their href is where to go without one.
document.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest("a[data-back]");
  if (link && window.history.length > 1 && document.referrer) {
    event.preventDefault();
    window.history.back();
  }
});
