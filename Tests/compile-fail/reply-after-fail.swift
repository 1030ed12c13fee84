// expect-error: 'right' consumed more than once
// Failing a request uses its right too: no reply after it.
import RunLoopKit

struct Refused: Error {}

func failThenAnswer(_ right: consuming ReplyRight) {
    right.fail(Refused())
    right.reply(LoopMessage(id: 1))
}
