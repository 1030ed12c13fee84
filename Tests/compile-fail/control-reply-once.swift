// expect-success
// The control: one answer compiles, so the errors above are the compiler's, not the setup's.
import RunLoopKit

func answerOnce(_ right: consuming ReplyRight, pool: WorkerPool) throws {
    if right.isCancelled { return }
    try pool.perform(moving: right) { right in right.reply(LoopMessage(id: 1)) }
}
