/// The release this tool is part of: the latest version heading of CHANGELOG.md and the
/// README's version line say the same (`RunLoopKitToolTests` checks the three agree).
enum ToolVersion {
    static let release = "0.1.0"
    /// The wire format version the tool's ports speak (docs/wire-format.md).
    static let wireFormat = 3
    static let line = "\(release) (wire format \(wireFormat))"
}
