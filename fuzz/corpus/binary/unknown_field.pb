
abc¸>