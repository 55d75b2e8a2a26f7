// The interactive figures (book/_ext/interactive.py): each <div class="interactive-figure">
// holds its Vega-Lite specification as JSON; Vega-Embed, served from the site
// (vega-bundle.js), draws it as SVG and adds its controls, each an input in or
// for a <label>. A group of radio buttons is named after its binding.
document.addEventListener("DOMContentLoaded", () => {
  for (const figure of document.querySelectorAll("div.interactive-figure")) {
    const spec = JSON.parse(figure.querySelector("script[type='application/json']").textContent);
    const view = document.createElement("div");
    figure.append(view);
    vegaEmbed(view, spec, {actions: false, renderer: "svg", mode: "vega-lite"})
      .then(() => {
        for (const radios of figure.querySelectorAll(".vega-bind-radio")) {
          radios.setAttribute("role", "radiogroup");
          radios.setAttribute("aria-label", radios.parentElement.querySelector(".vega-bind-name").textContent.trim());
        }
        figure.classList.add("interactive-ready");
      })
      .catch(error => console.error("interactive figure:", error));
  }
});
