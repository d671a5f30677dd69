
function download(Plotly, div, format, name) {
  return Plotly.downloadImage(div, { format, filename: name || "chart", scale: format === "png" ? 2 : 1 });
}

export default {
  async render({ model, el }) {
    const div = document.createElement("div");
    div.className = "sag2wb-chart";
    div.style.width = "100%";
    const waiting = document.createElement("div");
    waiting.className = "sag2wb-chart-loading";
    waiting.textContent = "loading plotly.js …";
    waiting.style.cssText = "font-size:12px;color:#777";
    el.appendChild(waiting);
    el.appendChild(div);
    const slot = plotlySlot();
    const Plotly = slot.Plotly || await slot.promise;
    waiting.remove();
    let drawnFigure = null, drawing = false, disposed = false;
    const config = () => ({
      responsive: true, displaylogo: false,
      toImageButtonOptions: { format: "png", filename: model.get("name") || "chart", scale: 2 },
      modeBarButtonsToAdd: [{
        name: "download as SVG", title: "Download plot as SVG",
        icon: Plotly.Icons["camera-retro"],
        click: (gd) => download(Plotly, gd, "svg", model.get("name")),
      }],
    });
    // Draw until the drawn figure is the model's current figure: a figure that arrives
    // while plotly is drawing is drawn next; an older one is never drawn after a newer one.
    const draw = async () => {
      if (drawing || disposed) return;
      drawing = true;
      try {
        while (!disposed && drawnFigure !== model.get("figure")) {
          const fig = model.get("figure") || {};
          // plotly mutates what it is given; the synced value stays pristine
          const t0 = performance.now();
          await Plotly.react(div, structuredClone(fig.data || []), structuredClone(fig.layout || {}), config());
          div.dataset.drawMs = String(Math.round(performance.now() - t0));  // read by the benchmark
          drawnFigure = fig;
          const meta = (fig.layout && fig.layout.meta) || {};
          div.dataset.rev = String(meta.rev ?? "");
          delete div.dataset.error;
        }
      } catch (err) {
        div.dataset.error = String(err);
        console.error("sag2wb chart", model.get("name"), err);
      } finally {
        drawing = false;
      }
    };
    const onChange = () => { draw(); };
    model.on("change:figure", onChange);
    const onMessage = (msg) => {
      if (msg && msg.download && drawnFigure) download(Plotly, div, msg.download, msg.filename);
    };
    model.on("msg:custom", onMessage);
    const resize = new ResizeObserver(() => {
      if (!disposed && div.offsetWidth > 0 && drawnFigure) Plotly.Plots.resize(div);
    });
    resize.observe(el);
    await draw();
    return () => {
      disposed = true;
      resize.disconnect();
      model.off("change:figure", onChange);
      model.off("msg:custom", onMessage);
      Plotly.purge(div);
    };
  },
};
