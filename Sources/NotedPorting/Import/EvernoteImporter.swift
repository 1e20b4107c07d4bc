import Crypto
import Foundation
import NotedCore
#if canImport(FoundationXML)
import FoundationXML
#endif

/// Evernote's `.enex` export: one file per notebook (its name becomes the folder), each
/// `<note>` with `<title>`, `<content>` (ENML, converted to Markdown by ``ENML``), `<created>`,
/// `<updated>` (`20240105T101112Z`), `<tag>`s and `<resource>`s (attachments: reported as not
/// imported yet; where the text shows one, a `[attachment skipped: name]` marks the place).
enum EvernoteImporter {
    static func read(_ source: ImportSource) throws -> Importer.Result {
        let files = source.files.filter { $0.path.lowercased().hasSuffix(".enex") }
        guard !files.isEmpty else { throw ImportError(source.origin, "no Evernote .enex file in it") }
        var notes: [Importer.Imported] = []
        var skipped: [Importer.Skipped] = []
        for file in files {
            let parsed = try ENEX.notes(file)
            let notebook = ((file.path as NSString).lastPathComponent as NSString).deletingPathExtension
            for (index, raw) in parsed.enumerated() {
                let place = "\(file.path) note \(index + 1) (\"\(raw.title.prefix(40))\")"
                var names: [String: String] = [:]
                for resource in raw.resources {
                    let hash = Insecure.MD5.hash(data: resource.data).map { String(format: "%02x", $0) }.joined()
                    names[hash] = resource.fileName ?? resource.mime ?? "attachment"
                    skipped.append(Importer.Skipped(source: "\(place) \(resource.fileName ?? resource.mime ?? "attachment")",
                                                    reason: "attachments are not imported yet"))
                }
                let body: String
                do {
                    body = try ENML.markdown(raw.content, attachmentNames: names)
                } catch {
                    skipped.append(Importer.Skipped(source: place, reason: "its content is not readable ENML: \(error)"))
                    continue
                }
                let created = enexDate(raw.created)
                let updated = enexDate(raw.updated) ?? created ?? Date(timeIntervalSince1970: 0)
                // Evernote's export has no note ids: the notebook, title and creation time name it.
                let sourceID = "\(notebook)\u{0}\(raw.title)\u{0}\(raw.created ?? "")\u{0}\(index)"
                notes.append(Importer.Imported(
                    note: PortableNote(
                        id: Importer.noteID(format: .evernote, sourceID: sourceID), title: raw.title, body: body, tags: raw.tags,
                        folder: notebook.isEmpty ? nil : notebook, pinned: false, trashed: false, created: created ?? updated, updated: updated),
                    source: place))
            }
        }
        return Importer.Result(format: .evernote, notes: notes, skipped: skipped)
    }

    /// `20240105T101112Z`.
    static func enexDate(_ text: String?) -> Date? {
        guard let text else { return nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return formatter.date(from: text) ?? Importer.isoDate(text)
    }
}

/// The notes of one `.enex` file.
enum ENEX {
    struct Resource {
        var data = Data()
        var mime: String?
        var fileName: String?
    }

    struct RawNote {
        var title = ""
        var content = ""
        var created: String?
        var updated: String?
        var tags: [String] = []
        var resources: [Resource] = []
    }

    final class Reader: NSObject, XMLParserDelegate {
        var notes: [RawNote] = []
        var note: RawNote?
        var resource: Resource?
        var text = ""
        var sawExport = false
        /// Elements open now: a file cut short ends with some still open.
        var open: [String] = []

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            text = ""
            open.append(name)
            switch name {
            case "en-export": sawExport = true
            case "note": note = RawNote()
            case "resource": resource = Resource()
            default: break
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

        func parser(_ parser: XMLParser, foundCDATA block: Data) { text += String(decoding: block, as: UTF8.self) }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            if open.last == name { open.removeLast() }
            switch name {
            case "title" where resource == nil: note?.title = text.trimmingCharacters(in: .whitespacesAndNewlines)
            case "content": note?.content = text
            case "created": note?.created = text.trimmingCharacters(in: .whitespaces)
            case "updated": note?.updated = text.trimmingCharacters(in: .whitespaces)
            case "tag": if !text.isEmpty { note?.tags.append(text) }
            case "data": resource?.data = Data(base64Encoded: text.filter { !$0.isWhitespace }) ?? Data()
            case "mime": resource?.mime = text
            case "file-name": resource?.fileName = text
            case "resource":
                if let resource { note?.resources.append(resource) }
                resource = nil
            case "note":
                if let note { notes.append(note) }
                note = nil
            default: break
            }
            text = ""
        }
    }

    static func notes(_ file: ImportSource.File) throws -> [RawNote] {
        let parser = XMLParser(data: file.data)
        parser.shouldResolveExternalEntities = false
        let reader = Reader()
        parser.delegate = reader
        guard parser.parse() else {
            throw ImportError(file.path, "line \(parser.lineNumber), column \(parser.columnNumber): not valid XML (\(parser.parserError.map { String(describing: $0) } ?? "unreadable"))")
        }
        guard reader.sawExport else { throw ImportError(file.path, "not an Evernote export (no en-export element)") }
        if let last = reader.open.last {
            throw ImportError(file.path, "line \(parser.lineNumber): the file ends inside <\(last)> (cut short?)")
        }
        return reader.notes
    }
}

/// ENML (Evernote's XHTML) as Markdown: headings, paragraphs and lines, bold, italic,
/// strike-through, links, lists (nested), checkboxes (`- [ ]`/`- [x]`), code, rules, tables as
/// rows of cells separated by ` | `, and attachments as `[attachment skipped: name]`.
enum ENML {
    indirect enum Node {
        case element(String, [String: String], [Node])
        case text(String)
    }

    final class TreeBuilder: NSObject, XMLParserDelegate {
        var stack: [(String, [String: String], [Node])] = [("root", [:], [])]

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            stack.append((name.lowercased(), attributes, []))
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { stack[stack.count - 1].2.append(.text(string)) }

        func parser(_ parser: XMLParser, foundCDATA block: Data) { stack[stack.count - 1].2.append(.text(String(decoding: block, as: UTF8.self))) }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            let (tag, attributes, children) = stack.removeLast()
            stack[stack.count - 1].2.append(.element(tag, attributes, children))
        }
    }

    /// HTML's named entities an ENML document may use without declaring them (its DTD does).
    static let entities: [String: String] = [
        "&nbsp;": "\u{00A0}", "&ndash;": "–", "&mdash;": "—", "&hellip;": "…", "&lsquo;": "‘", "&rsquo;": "’",
        "&ldquo;": "“", "&rdquo;": "”", "&copy;": "©", "&reg;": "®", "&trade;": "™", "&euro;": "€", "&bull;": "•",
        "&middot;": "·", "&times;": "×", "&deg;": "°", "&laquo;": "«", "&raquo;": "»",
    ]

    static func markdown(_ content: String, attachmentNames: [String: String] = [:]) throws -> String {
        var xml = content
        // The declaration and DOCTYPE name a DTD that is not fetched; its entities are mapped here.
        if let range = xml.range(of: "<!DOCTYPE[^>]*>", options: .regularExpression) { xml.removeSubrange(range) }
        if let range = xml.range(of: "<\\?xml[^>]*\\?>", options: .regularExpression) { xml.removeSubrange(range) }
        for (entity, value) in entities { xml = xml.replacingOccurrences(of: entity, with: value) }
        guard !xml.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { return "" }
        let parser = XMLParser(data: Data(xml.utf8))
        parser.shouldResolveExternalEntities = false
        let builder = TreeBuilder()
        parser.delegate = builder
        guard parser.parse(), let root = builder.stack.first else {
            throw ImportError("ENML", "line \(parser.lineNumber), column \(parser.columnNumber)")
        }
        var renderer = Renderer(attachmentNames: attachmentNames)
        let text = renderer.blocks(root.2, depth: 0)
        // At most one blank line between blocks; no space at the ends of lines.
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            var line = String(line)
            while line.last == " " || line.last == "\u{00A0}" { line.removeLast() }
            return line
        }
        var out: [String] = []
        for line in lines where !(line.isEmpty && (out.last?.isEmpty ?? true)) { out.append(line) }
        while out.last?.isEmpty == true { out.removeLast() }
        return out.joined(separator: "\n")
    }

    struct Renderer {
        var attachmentNames: [String: String]

        static let blockTags: Set<String> = ["div", "p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "table", "tr", "pre", "blockquote", "hr", "en-note"]

        /// Block-level content: each block on its own lines.
        mutating func blocks(_ nodes: [Node], depth: Int) -> String {
            var out = ""
            var pending: [Node] = []
            func flush(_ renderer: inout Renderer) {
                let text = renderer.inline(pending)
                if !text.trimmingCharacters(in: .whitespaces).isEmpty { out += text + "\n" }
                pending = []
            }
            for node in nodes {
                guard case .element(let tag, let attributes, let children) = node, Self.blockTags.contains(tag) else {
                    pending.append(node)
                    continue
                }
                flush(&self)
                switch tag {
                case "en-note":
                    out += blocks(children, depth: depth)
                case "h1", "h2", "h3", "h4", "h5", "h6":
                    let level: Int = Int(String(tag.dropFirst())) ?? 1
                    let heading: String = inline(children).trimmingCharacters(in: .whitespaces)
                    out += "\n" + String(repeating: "#", count: level) + " " + heading + "\n\n"
                case "p":
                    out += blocks(children, depth: depth) + "\n"
                case "div":
                    let inner = blocks(children, depth: depth)
                    // An empty line in Evernote is a div holding a <br/>.
                    out += inner.isEmpty ? "\n" : inner
                case "ul", "ol":
                    var number = 0
                    for child in children {
                        guard case .element("li", _, let itemChildren) = child else { continue }
                        number += 1
                        let marker = tag == "ol" ? "\(number). " : "- "
                        let item = blocks(itemChildren, depth: depth + 1).trimmingCharacters(in: .newlines)
                        let indent = String(repeating: "  ", count: depth)
                        let lines = item.split(separator: "\n", omittingEmptySubsequences: false)
                        out += indent + marker + (lines.first.map(String.init) ?? "") + "\n"
                        for line in lines.dropFirst() where !line.isEmpty {
                            // Nested lists come indented already; other lines continue the item.
                            out += (line.hasPrefix(" ") ? String(line) : indent + "  " + line) + "\n"
                        }
                    }
                    if depth == 0 { out += "\n" }
                case "li":
                    out += "- " + blocks(children, depth: depth + 1)
                case "table":
                    out += table(children) + "\n"
                case "tr":
                    out += table([node])
                case "pre":
                    out += "```\n" + plain(children) + "\n```\n\n"
                case "blockquote":
                    out += blocks(children, depth: depth).split(separator: "\n").map { "> " + $0 }.joined(separator: "\n") + "\n\n"
                case "hr":
                    out += "---\n\n"
                default:
                    _ = attributes
                    out += blocks(children, depth: depth)
                }
            }
            flush(&self)
            return out
        }

        /// Rows of a table (through tbody/thead), cells separated by ` | `.
        mutating func table(_ nodes: [Node]) -> String {
            var rows: [String] = []
            func walk(_ nodes: [Node], _ renderer: inout Renderer) {
                for node in nodes {
                    guard case .element(let tag, _, let children) = node else { continue }
                    if tag == "tr" {
                        let cells = children.compactMap { cell -> String? in
                            guard case .element(let name, _, let content) = cell, name == "td" || name == "th" else { return nil }
                            return renderer.blocks(content, depth: 0).replacingOccurrences(of: "\n", with: " ").trimmingCharacters(in: .whitespaces)
                        }
                        rows.append(cells.joined(separator: " | "))
                    } else {
                        walk(children, &renderer)
                    }
                }
            }
            walk(nodes, &self)
            return rows.joined(separator: "\n") + "\n"
        }

        /// Inline content on one line (a <br/> breaks it).
        mutating func inline(_ nodes: [Node]) -> String {
            var out = ""
            for node in nodes {
                switch node {
                case .text(let text):
                    // Source line breaks are spaces in HTML.
                    out += text.replacingOccurrences(of: "\n", with: " ")
                case .element(let tag, let attributes, let children):
                    let inner = { (renderer: inout Renderer) in renderer.inline(children) }
                    switch tag {
                    case "br": out += "\n"
                    case "b", "strong": out += wrap(inner(&self), "**")
                    case "i", "em": out += wrap(inner(&self), "*")
                    case "s", "strike", "del": out += wrap(inner(&self), "~~")
                    case "code": out += wrap(inner(&self), "`")
                    case "a":
                        let text = inner(&self)
                        if let href = attributes["href"], !href.isEmpty { out += "[\(text.isEmpty ? href : text)](\(href))" } else { out += text }
                    case "en-todo":
                        out += attributes["checked"] == "true" ? "- [x] " : "- [ ] "
                    case "en-media":
                        let name = attributes["hash"].flatMap { attachmentNames[$0] } ?? attributes["type"] ?? "attachment"
                        out += "[attachment skipped: \(name)]"
                    case "img":
                        if let src = attributes["src"] { out += "![\(attributes["alt"] ?? "")](\(src))" }
                    case "en-crypt":
                        out += "[encrypted text skipped]"
                    default:
                        out += Self.blockTags.contains(tag) ? blocks([node], depth: 0) : inner(&self)
                    }
                }
            }
            return out
        }

        func plain(_ nodes: [Node]) -> String {
            nodes.map { node -> String in
                switch node {
                case .text(let text): return text
                case .element("br", _, _): return "\n"
                case .element(_, _, let children): return plain(children)
                }
            }.joined()
        }

        /// `text` between `mark`s, with its outer spaces kept outside (Markdown needs them so).
        func wrap(_ text: String, _ mark: String) -> String {
            let core = text.trimmingCharacters(in: .whitespaces)
            guard !core.isEmpty else { return text }
            let leading = text.prefix { $0 == " " }
            let trailing = String(text.reversed().prefix { $0 == " " })
            return leading + mark + core + mark + trailing
        }
    }
}
