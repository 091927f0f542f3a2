import sys


def count_words(text):
    return len(text.split())


def main(paths):
    total = 0
    for path in paths:
        with open(path) as f:
            total += count_words(f.read())
    print(total)


if __name__ == "__main__":
    main(sys.argv[1:])
