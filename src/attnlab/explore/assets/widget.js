// The notebook widget (anywidget): the same explorer inside the cell's element, its requests sent to the Python
// kernel as messages and answered there by the same functions as the server's API.

function render({model, el: root}) {
  const explorer = new Explorer(root, model.get("boot"), widgetTransport(model));
  root.attnlabExplorer = explorer;
  return () => { root.attnlabExplorer = null; };
}

export default {render};
