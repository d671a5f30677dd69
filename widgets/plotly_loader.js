
const slot = plotlySlot();
if (!slot.Plotly) { slot.Plotly = module.exports; slot.resolve(module.exports); }
export default { render({ el }) { el.style.display = "none"; } };
