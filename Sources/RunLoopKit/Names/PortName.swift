/// Rules for port names, which become file names in the runtime directory.
///
/// A name is 1 to 100 characters of `A-Z a-z 0-9 . _ -`, not starting with `.` or `-`,
/// so that it can never climb out of the directory (`../x`) or hide in it.
public enum PortName {
    public static let maxLength = 100

    /// Throws `PortError.invalidName` with the reason when `name` breaks the rules.
    public static func validate(_ name: String) throws(PortError) {
        guard !name.isEmpty else { throw .invalidName(name, reason: "empty") }
        guard name.utf8.count <= maxLength else {
            throw .invalidName(name, reason: "longer than \(maxLength) characters")
        }
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
        guard allowed else { throw .invalidName(name, reason: "only A-Z a-z 0-9 . _ - are allowed") }
        guard let first = name.utf8.first, first != 0x2E, first != 0x2D else {
            throw .invalidName(name, reason: "must not start with '.' or '-'")
        }
    }
}
