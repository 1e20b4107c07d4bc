import Crypto
import Foundation
import NotedCore

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Evernote's `.enex` export: one file per notebook (its name becomes the folder), each
/// `<note>` with `<title>`, `<content>` (ENML, converted to Markdown by ``ENML``), `<created>`,
/// `<updated>` (`20240105T101112Z`), `<tag>`s and `<resource>`s (attachments: each one's file
/// comes along, and where the text shows it, `![name](attachment:SHA256)` does).
enum EvernoteImporter {
    static func read(_ source: ImportSource) throws -> Importer.Result {
        let files = source.files.filter { $0.path.lowercased().hasSuffix(".enex") }
        guard !files.isEmpty else { throw ImportError(source.origin, "no Evernote .enex file in it") }
        var notes: [Importer.Imported] = []
        var skipped = SkippedList(limit: source.budget.maxSkipped)
        for file in files {
            let parsed = try ENEX.notes(file, budget: source.budget)
            let notebook = ((file.path as NSString).lastPathComponent as NSString).deletingPathExtension
            for (index, raw) in parsed.enumerated() {
                let place = "\(file.path) note \(index + 1) (\"\(raw.title.prefix(40))\")"
                // Each resource becomes an attachment; the note's <en-media hash="MD5"> shows it.
                var marks: [String: String] = [:]
                var attachments: [PortableAttachment] = []
                for (number, resource) in raw.resources.enumerated() {
                    let name = resource.fileName ?? "attachment \(number + 1)" + Self.suffix(for: resource.mime)
                    guard !resource.data.isEmpty else {
                        skipped.append(
                            Importer.Skipped(
                                source: "\(place) \(name)", reason: "the attachment has no data in the export"))
                        continue
                    }
                    try source.budget.charge(resource.data.count, origin: place)  // the attachment's copy of the bytes
                    let attachment = PortableAttachment(name: name, type: resource.mime, data: resource.data)
                    marks[Insecure.MD5.hash(data: resource.data).lowercaseHex] = attachment.markdown
                    if !attachments.contains(where: { $0.sha256 == attachment.sha256 }) {
                        attachments.append(attachment)
                    }
                }
                guard let content = raw.content else {
                    skipped.append(Importer.Skipped(source: place, reason: "no content element"))
                    continue
                }
                let body: String
                try source.budget.charge(content.utf8.count * 2, origin: place)  // the ENML tree and the Markdown
                do {
                    body = try ENML.markdown(content, attachmentMarks: marks)
                } catch {
                    skipped.append(
                        Importer.Skipped(source: place, reason: "its content is not readable ENML: \(error)"))
                    continue
                }
                let created = enexDate(raw.created)
                let updated = enexDate(raw.updated) ?? created
                // Evernote's export has no note ids: the notebook, title and creation time name it.
                let sourceID = "\(notebook)\u{0}\(raw.title)\u{0}\(raw.created ?? "")\u{0}\(index)"
                try notes.append(
                    charging: source.budget,
                    Importer.Imported(
                        note: PortableNote(
                            id: Importer.noteID(format: .evernote, sourceID: sourceID), title: raw.title, body: body,
                            tags: raw.tags,
                            folder: notebook.isEmpty ? nil : notebook, pinned: false, trashed: false,
                            created: created ?? updated, updated: updated,
                            attachments: attachments),
                        source: place))
            }
        }
        return Importer.Result(format: .evernote, notes: notes, skipped: skipped)
    }

    /// `.png` for `image/png`: a name for a resource the export gives none.
    static func suffix(for mime: String?) -> String {
        guard let subtype = mime?.split(separator: "/").last, subtype.allSatisfy({ $0.isLetter || $0.isNumber }) else {
            return ""
        }
        return "." + (subtype == "jpeg" ? "jpg" : subtype.lowercased())
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
        /// Nil when the note has no `<content>` (a damaged export).
        var content: String?
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
        /// Every character read is charged: what a note holds, and the work of reading it.
        let budget: ImportBudget
        let origin: String
        var failure: ImportError?

        init(budget: ImportBudget, origin: String) {
            self.budget = budget
            self.origin = origin
        }

        func charge(_ parser: XMLParser, _ bytes: Int) {
            guard failure == nil else { return }
            do {
                try budget.charge(bytes, origin: origin)
            } catch {
                failure = error
                parser.abortParsing()
            }
        }

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            text = ""
            open.append(name)
            switch name {
            case "en-export": sawExport = true
            case "note": note = RawNote()
            case "resource": resource = Resource()
            default: break
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            charge(parser, string.utf8.count)
            text += string
        }

        func parser(_ parser: XMLParser, foundCDATA block: Data) {
            charge(parser, block.count)
            text += String(decoding: block, as: UTF8.self)
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            charge(parser, 64)
            if open.last == name { open.removeLast() }
            // A note's own fields are its children; Evernote 10's <task>s inside a note have a
            // <title>, <created> and <updated> of their own.
            let ofNote = open.last == "note"
            switch name {
            case "title" where ofNote: note?.title = text.trimmingCharacters(in: .whitespacesAndNewlines)
            case "content" where ofNote: note?.content = text
            case "created" where ofNote: note?.created = text.trimmingCharacters(in: .whitespacesAndNewlines)
            case "updated" where ofNote: note?.updated = text.trimmingCharacters(in: .whitespacesAndNewlines)
            case "tag" where ofNote: if !text.isEmpty { note?.tags.append(text) }
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

    static func notes(_ file: ImportSource.File, budget: ImportBudget = .unbounded) throws -> [RawNote] {
        if let reason = declaresEntities(file.data) { throw ImportError(file.path, reason) }
        let parser = XMLParser(data: file.data)
        parser.shouldResolveExternalEntities = false
        parser.externalEntityResolvingPolicy = .never
        let reader = Reader(budget: budget, origin: file.path)
        parser.delegate = reader
        let parsed = parser.parse()
        if let failure = reader.failure { throw failure }
        guard parsed else {
            throw ImportError(
                file.path,
                "line \(parser.lineNumber), column \(parser.columnNumber): not valid XML (\(parser.parserError.map { String(describing: $0) } ?? "unreadable"))"
            )
        }
        guard reader.sawExport else { throw ImportError(file.path, "not an Evernote export (no en-export element)") }
        if let last = reader.open.last {
            throw ImportError(file.path, "line \(parser.lineNumber): the file ends inside <\(last)> (cut short?)")
        }
        return reader.notes
    }

    /// Why a document that declares entities is refused, or nil. Evernote's exports declare
    /// none; the XML reader expands internal ones (an entity of a kilobyte named a million
    /// times is a gigabyte), so a document that declares one is not read at all.
    static func declaresEntities(_ data: Data) -> String? {
        data.range(of: Data("<!ENTITY".utf8)) == nil
            ? nil
            : "declares XML entities (<!ENTITY …>), which no Evernote export does; it is not read"
    }
}

/// ENML (Evernote's XHTML) as Markdown: headings, paragraphs and lines, bold, italic,
/// strike-through, links, lists (nested), checkboxes (`- [ ]`/`- [x]`), code, rules, tables as
/// rows of cells separated by ` | `, and attachments as their Markdown (`![name](attachment:SHA256)`).
enum ENML {
    indirect enum Node {
        case element(String, [String: String], [Node])
        case text(String)
    }

    final class TreeBuilder: NSObject, XMLParserDelegate {
        var stack: [(String, [String: String], [Node])] = [("root", [:], [])]

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            stack.append((name.lowercased(), attributes, []))
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            stack[stack.count - 1].2.append(.text(string))
        }

        func parser(_ parser: XMLParser, foundCDATA block: Data) {
            stack[stack.count - 1].2.append(.text(String(decoding: block, as: UTF8.self)))
        }

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

    static func markdown(_ content: String, attachmentMarks: [String: String] = [:]) throws -> String {
        if content.contains("<!ENTITY"), let reason = ENEX.declaresEntities(Data(content.utf8)) {
            throw ImportError("ENML", reason)
        }
        var xml = content
        // The declaration and DOCTYPE name a DTD that is not fetched; its entities are mapped here.
        if let range = xml.range(of: "<!DOCTYPE[^>]*>", options: .regularExpression) { xml.removeSubrange(range) }
        if let range = xml.range(of: "<\\?xml[^>]*\\?>", options: .regularExpression) { xml.removeSubrange(range) }
        for (entity, value) in entities { xml = xml.replacingOccurrences(of: entity, with: value) }
        guard !xml.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { return "" }
        let parser = XMLParser(data: Data(xml.utf8))
        parser.shouldResolveExternalEntities = false
        parser.externalEntityResolvingPolicy = .never
        let builder = TreeBuilder()
        parser.delegate = builder
        guard parser.parse(), let root = builder.stack.first else {
            throw ImportError("ENML", "line \(parser.lineNumber), column \(parser.columnNumber)")
        }
        var lines = Lines(attachmentMarks: attachmentMarks)
        lines.block(root.2)
        var out = lines.lines
        while out.first?.isEmpty == true { out.removeFirst() }
        while out.last?.isEmpty == true { out.removeLast() }
        return out.joined(separator: "\n")
    }

    /// Evernote's model is lines, not paragraphs: every block is one line (or several, for
    /// nested blocks and `<br/>`s), and an empty block is an empty line. Inline whitespace
    /// collapses to one space; each line is trimmed.
    struct Lines {
        var attachmentMarks: [String: String]
        var lines: [String] = []
        var current = ""
        var depth = 0

        static let blocks: Set<String> = [
            "div", "p", "en-note", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "li", "tr", "hr",
            "ul", "ol", "table", "tbody", "thead", "tfoot", "pre",
        ]

        mutating func emit() {
            lines.append(current.trimmingCharacters(in: .whitespaces))
            current = ""
        }

        /// Ends the line under way, if it has anything.
        mutating func flush() {
            if !current.trimmingCharacters(in: .whitespaces).isEmpty { emit() } else { current = "" }
        }

        /// The children of a block: its lines; nothing in it at all → one empty line.
        mutating func block(_ nodes: [Node]) {
            flush()
            let before = lines.count
            content(nodes)
            flush()
            if lines.count == before { lines.append("") }
        }

        mutating func content(_ nodes: [Node]) {
            for node in nodes {
                switch node {
                case .text(let text):
                    append(Self.collapse(text))
                case .element(let tag, let attributes, let children):
                    element(tag, attributes, children)
                }
            }
        }

        mutating func append(_ text: String) {
            guard !text.isEmpty else { return }
            if current.hasSuffix(" ") && text.hasPrefix(" ") { current += text.dropFirst() } else { current += text }
        }

        mutating func element(_ tag: String, _ attributes: [String: String], _ children: [Node]) {
            switch tag {
            case "div", "p", "en-note", "blockquote", "pre":
                block(children)
            case "h1", "h2", "h3", "h4", "h5", "h6":
                flush()
                let level = Int(String(tag.dropFirst())) ?? 1
                lines.append(String(repeating: "#", count: level) + " " + inline(children))
            case "hr":
                flush()
                lines.append("---")
            case "ul", "ol":
                flush()
                list(ordered: tag == "ol", todo: attributes["style"]?.contains("--en-todo:true") == true, children)
            case "li":
                // A list item outside a list.
                block(children)
            case "table", "tbody", "thead", "tfoot":
                flush()
                for child in children { if case .element(let name, let a, let c) = child { element(name, a, c) } }
            case "tr":
                flush()
                let cells = children.compactMap { cell -> String? in
                    guard case .element(let name, _, let content) = cell, name == "td" || name == "th" else {
                        return nil
                    }
                    return inline(content)
                }
                lines.append(cells.joined(separator: " | "))
            case "br":
                emit()
            default:
                append(inlineElement(tag, attributes, children))
            }
        }

        /// Items as `- `, `1. ` or `- [ ] ` lines; a list nested beside an item goes two
        /// spaces further in.
        mutating func list(ordered: Bool, todo: Bool, _ children: [Node]) {
            var number = 0
            let indent = String(repeating: "  ", count: depth)
            for child in children {
                guard case .element(let name, let attributes, let content) = child else { continue }
                if name == "ul" || name == "ol" {
                    depth += 1
                    list(ordered: name == "ol", todo: attributes["style"]?.contains("--en-todo:true") == true, content)
                    depth -= 1
                    continue
                }
                guard name == "li" else { continue }
                number += 1
                var item = Lines(attachmentMarks: attachmentMarks)
                item.depth = depth + 1
                item.content(content)
                item.flush()
                var itemLines = item.lines
                if itemLines.isEmpty { itemLines = [""] }
                var first = itemLines.removeFirst()
                let marker: String
                if todo {
                    marker = attributes["style"]?.contains("--en-checked:true") == true ? "- [x] " : "- [ ] "
                } else if first.hasPrefix("- [x] ") || first.hasPrefix("- [ ] ") {
                    marker = ""  // an en-todo already made it a task
                } else {
                    marker = ordered ? "\(number). " : "- "
                }
                first = indent + marker + first
                lines.append(first)
                lines += itemLines
            }
        }

        /// Inline content as one line's text.
        func inline(_ nodes: [Node]) -> String {
            var sub = Lines(attachmentMarks: attachmentMarks)
            sub.content(nodes)
            sub.flush()
            return sub.lines.joined(separator: " ").trimmingCharacters(in: .whitespaces)
        }

        func inlineElement(_ tag: String, _ attributes: [String: String], _ children: [Node]) -> String {
            switch tag {
            case "b", "strong": return wrap(children, "**")
            case "i", "em": return wrap(children, "*")
            case "a":
                let text = inline(children)
                guard let href = attributes["href"], !href.isEmpty else { return text }
                return "[\(text.isEmpty ? href : text)](\(href))"
            case "en-todo": return attributes["checked"] == "true" ? "- [x] " : "- [ ] "
            case "en-media":
                if let mark = attributes["hash"].flatMap({ attachmentMarks[$0.lowercased()] }) { return mark }
                return "[attachment skipped: \(attributes["type"] ?? "attachment")]"
            case "en-crypt": return "[encrypted text skipped]"
            case "img":
                return attributes["src"].map { "![\(attributes["alt"] ?? "")](\($0))" } ?? ""
            default:
                // span, font, u, s, sup, sub, code…: their text only.
                var sub = Lines(attachmentMarks: attachmentMarks)
                sub.content(children)
                return sub.lines.joined(separator: " ") + (sub.lines.isEmpty ? "" : " ") + sub.current
            }
        }

        /// `**text**` with the text's outer spaces kept outside the marks.
        func wrap(_ children: [Node], _ mark: String) -> String {
            var sub = Lines(attachmentMarks: attachmentMarks)
            sub.content(children)
            let text = (sub.lines + [sub.current]).joined(separator: " ")
            let core = text.trimmingCharacters(in: .whitespaces)
            guard !core.isEmpty else { return text }
            return (text.hasPrefix(" ") ? " " : "") + mark + core + mark + (text.hasSuffix(" ") ? " " : "")
        }

        /// Runs of spaces, tabs and newlines as one space.
        static func collapse(_ text: String) -> String {
            var out = ""
            var space = false
            for character in text {
                if character == " " || character == "\t" || character == "\n" || character == "\r"
                    || character == "\r\n"
                {
                    if !space { out.append(" ") }
                    space = true
                } else {
                    out.append(character)
                    space = false
                }
            }
            return out
        }
    }
}
