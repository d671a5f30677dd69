
function plotlySlot() {
  const g = globalThis;
  if (!g.__sag2wbPlotly) {
    let resolve;
    const promise = new Promise((r) => { resolve = r; });
    g.__sag2wbPlotly = { promise, resolve, Plotly: null };
  }
  return g.__sag2wbPlotly;
}
