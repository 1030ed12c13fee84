import ArgumentParser
import RunLoopKit

/// `runloopkit keygen PATH`: a new CURVE key pair, in key files (`docs/security.md`).
struct KeygenCommand: ToolCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Write a new CURVE key pair to PATH (mode 0600) and its public key to PATH.pub.",
        discussion: """
            Both files are CZMQ certificates. PATH is for the port or client that owns the pair \
            (LocalPort.requireCurve, RemotePort's clientKeys; read with PortKeyPair(contentsOf:)); \
            PATH.pub goes into the allow-list directories of the ports that client may reach. \
            An existing file is never overwritten.
            """
    )

    @Argument(help: "Where to write the key pair; the public key goes to PATH.pub.")
    var path: String

    @OptionGroup var output: OutputOptions

    struct Report: Encodable {
        let publicKey: String
        let secretKeyFile: String
        let publicKeyFile: String
    }

    func execute() throws(ToolFailure) {
        let publicPath = path + ".pub"
        var writing = path
        do throws(PortError) {
            let keys = try PortKeyPair.generate()
            // Each file is created exclusively (linked in place, never renamed over): no check
            // beforehand, which a file made between the check and the write would get past.
            try keys.write(to: path, exclusive: true)
            writing = publicPath
            do throws(PortError) {
                try keys.writePublicKey(to: publicPath, exclusive: true)
            } catch {
                try? Kernel.unlink(path) // the pair just made, useless without its public key
                throw error
            }
            if output.json {
                return ToolOutput.printJSON(Report(publicKey: keys.publicKey, secretKeyFile: path, publicKeyFile: publicPath))
            }
            print("public key: \(keys.publicKey)")
            print("key pair:   \(path) (mode 600)")
            print("public:     \(publicPath)")
        } catch {
            if case .system(let cause) = error, cause.code == .fileExists {
                throw ToolFailure(.usage, "\(writing) exists: keygen never overwrites a key file")
            }
            throw ToolFailure(.failure, "\(error)")
        }
    }
}
