// What the search index holds of a note: its title, body and tags.

export function searchText(fields) {
  return `${fields.title}\n${fields.body}\n${fields.tags.join(" ")}`;
}
