#include "trainer/data/gpt2_pretokenizer.h"

#include "trainer/data/utf8.h"

namespace spotps {

CodePointClass Gpt2Pretokenizer::ClassAt(size_t at, int* length) const {
  return ClassOfCodePoint(DecodeValidUtf8(text_.data() + at, length));
}

size_t Gpt2Pretokenizer::RunEnd(size_t at, CodePointClass run_class) const {
  int length = 0;
  while (at < text_.size() && ClassAt(at, &length) == run_class) at += length;
  return at;
}

size_t Gpt2Pretokenizer::ContractionLength(size_t at) const {
  const absl::string_view rest = text_.substr(at);
  if (rest.size() < 2 || rest[0] != '\'') return 0;
  switch (rest[1]) {
    case 's':
    case 't':
    case 'm':
    case 'd':
      return 2;
    case 'r':
    case 'v':
      return rest.size() >= 3 && rest[2] == 'e' ? 3 : 0;
    case 'l':
      return rest.size() >= 3 && rest[2] == 'l' ? 3 : 0;
    default:
      return 0;
  }
}

// \s+(?!\S) takes the whole run when it reaches the end of the text, and
// otherwise backs off one code point so that whitespace follows; when that
// leaves nothing (a run of one before a non-space), \s+ takes the one.
size_t Gpt2Pretokenizer::WhitespacePieceEnd(size_t at) const {
  size_t last_start = at;
  size_t end = at;
  int length = 0;
  while (end < text_.size() && ClassAt(end, &length) == CodePointClass::kWhitespace) {
    last_start = end;
    end += length;
  }
  if (end == text_.size() || last_start == at) return end;
  return last_start;
}

bool Gpt2Pretokenizer::Next(absl::string_view* piece) {
  const size_t start = position_;
  if (start >= text_.size()) return false;
  size_t end = start + ContractionLength(start);
  if (end == start) {
    int length = 0;
    CodePointClass first = ClassAt(start, &length);
    size_t run_start = start;
    // " ?" : one ASCII space joins the letter, number or other run after it.
    if (text_[start] == ' ' && start + 1 < text_.size()) {
      int next_length = 0;
      const CodePointClass next = ClassAt(start + 1, &next_length);
      if (next != CodePointClass::kWhitespace) {
        first = next;
        run_start = start + 1;
      }
    }
    end = first == CodePointClass::kWhitespace ? WhitespacePieceEnd(start)
                                               : RunEnd(run_start, first);
  }
  *piece = text_.substr(start, end - start);
  position_ = end;
  return true;
}

}  // namespace spotps
