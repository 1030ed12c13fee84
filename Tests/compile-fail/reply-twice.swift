// expect-error: 'right' consumed more than once
// A ReplyRight answers once: the compiler must reject a second answer (`.ci/check-compile-fail`).
import RunLoopKit

func answerTwice(_ right: consuming ReplyRight) {
    right.reply(LoopMessage(id: 1))
    right.reply(LoopMessage(id: 2))
}
