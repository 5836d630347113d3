"""Seed 002's training step, with scikit-learn in place of keras.

The seed trains Flatten -> Dense(128, relu) -> Dense(10) for 10 epochs, prints the test loss
and accuracy, saves the model under a timestamped path in PROJECT_ROOT and writes that path to
PROJECT_ROOT/output.txt, which the pipeline reads back as the step's `output` (file_outputs).
This is the same with an MLPClassifier of one 128-unit hidden layer, saved with pickle.
"""
import argparse
import calendar
import os
import pickle
import time
import warnings

from constants import PROJECT_ROOT
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, log_loss
from sklearn.neural_network import MLPClassifier


def train(data_dir: str):
    # Training
    model = MLPClassifier(hidden_layer_sizes=(128,), activation='relu', max_iter=10, random_state=0)

    with open(os.path.join(data_dir, 'train_images.pickle'), 'rb') as f:
        train_images = pickle.load(f)

    with open(os.path.join(data_dir, 'train_labels.pickle'), 'rb') as f:
        train_labels = pickle.load(f)

    with warnings.catch_warnings():  # 10 epochs, as the seed's model.fit(..., epochs=10), stop short of convergence
        warnings.simplefilter('ignore', ConvergenceWarning)
        model.fit(train_images.reshape(len(train_images), -1), train_labels)

    with open(os.path.join(data_dir, 'test_images.pickle'), 'rb') as f:
        test_images = pickle.load(f)

    with open(os.path.join(data_dir, 'test_labels.pickle'), 'rb') as f:
        test_labels = pickle.load(f)

    # Evaluation
    flat = test_images.reshape(len(test_images), -1)
    test_loss = log_loss(test_labels, model.predict_proba(flat))
    test_acc = accuracy_score(test_labels, model.predict(flat))

    print(f'Test Loss: {test_loss}')
    print(f'Test Acc: {test_acc}')

    # Save model
    ts = calendar.timegm(time.gmtime())
    model_path = os.path.join(PROJECT_ROOT, f'mnist-{ts}.pickle')
    with open(model_path, 'wb') as f:
        pickle.dump(model, f)

    with open(os.path.join(PROJECT_ROOT, 'output.txt'), 'w') as f:
        f.write(model_path)
        print(f'Model written to: {model_path}')


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description='Kubeflow FMNIST training script')
    parser.add_argument('--data_dir', help='path to images and labels.')
    args = parser.parse_args()

    train(data_dir=args.data_dir)
