"""Seed 002's preprocessing step, without TensorFlow or a download.

The seed loads Fashion MNIST with keras (a download) and scales the pixels to [0, 1]. Here the
images are scikit-learn's bundled 8x8 digits (1797 images, ten classes, no network), split
into train and test sets and scaled the same way; the four pickles are the seed's.
"""
import argparse
import os
import pickle

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def preprocess(data_dir: str):
    digits = load_digits()
    train_images, test_images, train_labels, test_labels = train_test_split(
        digits.images, digits.target, test_size=0.25, random_state=0, stratify=digits.target)

    train_images = train_images / 16.0  # the digits' pixels are 0..16 (Fashion MNIST's 0..255)
    test_images = test_images / 16.0

    os.makedirs(data_dir, exist_ok=True)

    with open(os.path.join(data_dir, 'train_images.pickle'), 'wb') as f:
        pickle.dump(train_images, f)

    with open(os.path.join(data_dir, 'train_labels.pickle'), 'wb') as f:
        pickle.dump(train_labels, f)

    with open(os.path.join(data_dir, 'test_images.pickle'), 'wb') as f:
        pickle.dump(test_images, f)

    with open(os.path.join(data_dir, 'test_labels.pickle'), 'wb') as f:
        pickle.dump(test_labels, f)
    print(f'{len(train_images)} train and {len(test_images)} test images of {train_images.shape[1:]} in {data_dir}')


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description='Kubeflow MNIST training script')
    parser.add_argument('--data_dir', help='path to images and labels.')
    args = parser.parse_args()

    preprocess(data_dir=args.data_dir)
