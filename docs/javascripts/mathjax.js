// MathJax settings for pymdownx.arithmatex (generic mode); the MathJax script itself is
// not bundled: pages show the TeX source when it is not loaded.
window.MathJax = {
  tex: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" },
};
