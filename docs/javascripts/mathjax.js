// MathJax settings for pymdownx.arithmatex (generic mode), read by the vendored MathJax 3
// (javascripts/vendor/mathjax/tex-chtml.js, loaded after this file; no CDN: the site renders offline).
window.MathJax = {
  tex: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" },
};
