#include "core/text.h"

#include <gtest/gtest.h>

namespace collie {
namespace {

TEST(ValidUtf8, KeepsValidTextAndReplacesEveryInvalidSequence) {
  EXPECT_EQ(valid_utf8("plain"), "plain");
  EXPECT_EQ(valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(valid_utf8("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(valid_utf8("caf\xe9"), "caf\xef\xbf\xbd");                  // Latin-1
  EXPECT_EQ(valid_utf8("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");        // an overlong '/'
  EXPECT_EQ(valid_utf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // a surrogate
  EXPECT_EQ(valid_utf8("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd");        // truncated at the end
}

// Replay lines pasted a file name with a space as two words, and a
// --filter regex with $ for the shell to expand.
TEST(ShellQuote, QuotesOnlyWhatAShellWouldChange) {
  EXPECT_EQ(shell_quote("scenarios/tutorial/all_reduce.yaml"), "scenarios/tutorial/all_reduce.yaml");
  EXPECT_EQ(shell_quote("crash:rank=2,op=1"), "crash:rank=2,op=1");
  EXPECT_EQ(shell_quote("my job.yaml"), "'my job.yaml'");
  EXPECT_EQ(shell_quote("^p2p/x$"), "'^p2p/x$'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a;rm -rf ~"), "'a;rm -rf ~'");
}

}  // namespace
}  // namespace collie
