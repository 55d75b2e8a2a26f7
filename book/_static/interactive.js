// The interactive figures (book/_ext/interactive.py): each <div class="interactive-figure">
// holds its Vega-Lite specification as JSON; Vega-Embed, served from the site
// (vega-bundle.js), draws it as SVG and adds its labelled controls.
document.addEventListener("DOMContentLoaded", () => {
  for (const figure of document.querySelectorAll("div.interactive-figure")) {
    const spec = JSON.parse(figure.querySelector("script[type='application/json']").textContent);
    const view = document.createElement("div");
    figure.append(view);
    vegaEmbed(view, spec, {actions: false, renderer: "svg", mode: "vega-lite"})
      .then(() => figure.classList.add("interactive-ready"))
      .catch(error => console.error("interactive figure:", error));
  }
});
